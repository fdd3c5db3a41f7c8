#!/usr/bin/env bash
# The runs behind docs/findings.md: FedAdamW Table 1's eight methods and its components ablation
# (Table 4) on real Fashion-MNIST (preset fmnist-small: CPU-sized models), 3 seeds, 100 rounds,
# at the paper's learning rates and at learning rates tuned per method on a validation split.
# Column: the preset's CPU model of the ResNet-18 column (cnn on 14x14 images) at Dirichlet 0.1,
# selected with --set on the grid keys (a --set on a grid key replaces that column's values).
# Usage: bash benchmarks/findings.sh [OUT]   (about an hour on 2 quiet CPU cores)
set -euo pipefail
OUT=${1:-results/findings}
FB=${FEDBENCH:-fedbench}
COLUMN=(--set model.name=cnn --set partition.alpha=0.1 --set eval.diagnostics=true)
PICK=(--set model.name=cnn --set partition.alpha=0.1)
SGD="FedAvg,SCAFFOLD,FedCM,FedAdam"
ADAM="Local Adam,FedLADA,Local AdamW,FedAdamW"
TUNE=(--rounds 20 --out "$OUT" --workers 2)

# 1. The paper's learning rates.
$FB run table1 --preset fmnist-small "${COLUMN[@]}" --seeds 3 --out "$OUT" --workers 2

# 2. Each row's learning rate tuned on a 10% validation split (20-round trials), then 3 seeds.
$FB tune table1 --preset fmnist-small "${PICK[@]}" --methods "$SGD" \
  --grid algorithm.lr=0.01,0.03,0.1,0.3,1.0 "${TUNE[@]}"
$FB tune table1 --preset fmnist-small "${PICK[@]}" --methods "$ADAM" \
  --grid algorithm.lr=0.0001,0.0003,0.001,0.003,0.01 "${TUNE[@]}"
$FB run table1 --preset fmnist-small "${COLUMN[@]}" --seeds 3 --out "$OUT" --workers 2 \
  --tuned "$OUT/table1-fmnist-small-tune/tuned.yaml"
# 3. The components ablation at the paper's learning rate, then tuned.
$FB ablate components --preset fmnist-small --seeds 3 --set eval.diagnostics=true --out "$OUT" --workers 2
$FB tune components --preset fmnist-small --grid algorithm.lr=0.0001,0.0003,0.001,0.003,0.01 "${TUNE[@]}"
$FB ablate components --preset fmnist-small --seeds 3 --set eval.diagnostics=true --out "$OUT" --workers 2 \
  --tuned "$OUT/components-fmnist-small-tune/tuned.yaml"
