#!/usr/bin/env bash
# The runs behind docs/findings.md: FedAdamW Table 1's eight methods (its four columns) and its
# components ablation (Table 4) on real Fashion-MNIST (preset fmnist-small: CPU-sized models,
# cnn for ResNet-18 and logreg for ViT-Tiny), 3 seeds, 100 rounds, at the paper's learning rates
# and at learning rates tuned per method and column on a validation split.
# Finished runs and trials are skipped, so a rerun (or a rerun with a wider grid) only trains what
# is new. Usage: bash benchmarks/findings.sh [OUT]   (about 90 minutes on 2 quiet CPU cores)
set -euo pipefail
OUT=${1:-results/findings}
FB=${FEDBENCH:-fedbench}
DIAG=(--set eval.diagnostics=true)
TUNE=(--rounds 20 --out "$OUT" --workers 2)
SGD_LR=algorithm.lr=0.01,0.03,0.1,0.3,1.0,3.0
ADAM_LR=algorithm.lr=0.0001,0.0003,0.001,0.003,0.01,0.03
DIAGNOSTICS=(--metric local_step_ratio --metric client_drift --metric v_spread)

# 1. The paper's learning rates.
$FB run table1 --preset fmnist-small "${DIAG[@]}" --seeds 3 --out "$OUT" --workers 2

# 2. Each row's learning rate tuned per column on a 10% validation split (20-round trials), then
#    3 seeds. FedAdam has two learning rates (client and server): both are searched.
$FB tune table1 --preset fmnist-small --methods "FedAvg,SCAFFOLD,FedCM" --grid "$SGD_LR" "${TUNE[@]}"
$FB tune table1 --preset fmnist-small --methods "FedAdam" \
  --grid algorithm.lr=0.03,0.1,0.3 --grid algorithm.server_lr=0.001,0.003,0.01,0.03,0.1 "${TUNE[@]}"
$FB tune table1 --preset fmnist-small --methods "Local Adam,FedLADA,Local AdamW,FedAdamW" \
  --grid "$ADAM_LR" "${TUNE[@]}"
$FB run table1 --preset fmnist-small "${DIAG[@]}" --seeds 3 --out "$OUT" --workers 2 \
  --tuned "$OUT/table1-fmnist-small-tune/tuned.yaml"

# 3. The components ablation at the paper's learning rate, then tuned.
$FB ablate components --preset fmnist-small --seeds 3 --set eval.diagnostics=true --out "$OUT" --workers 2
$FB tune components --preset fmnist-small --grid "$ADAM_LR" "${TUNE[@]}"
$FB ablate components --preset fmnist-small --seeds 3 --set eval.diagnostics=true --out "$OUT" --workers 2 \
  --tuned "$OUT/components-fmnist-small-tune/tuned.yaml"

# 4. The reports with the diagnostics (mean over evaluated rounds), and the paper's orderings.
for t in table1-fmnist-small table1-fmnist-small-tuned components-fmnist-small components-fmnist-small-tuned; do
  $FB report "$OUT/$t" "${DIAGNOSTICS[@]}"
done
for t in table1-fmnist-small table1-fmnist-small-tuned; do
  $FB compare "$OUT/$t:FedAdamW" "$OUT/$t:Local AdamW" "$OUT/$t:FedAvg"
done
for t in components-fmnist-small components-fmnist-small-tuned; do
  $FB compare "$OUT/$t:A4" "$OUT/$t:A1" "$OUT/$t:A2" "$OUT/$t:A3"
done

# 5. Why coupled weight decay (A3) costs accuracy: A3 and A4 at the tuned lr without any weight
#    decay (the two rules are then the same), against A4 with its decay.
$FB ablate components --preset fmnist-small --seeds 3 --set eval.diagnostics=true \
  --set algorithm.weight_decay=0 --methods "A3: w/o decoupled weight decay,A4: FedAdamW (Full)" \
  --out "$OUT/wd0" --workers 2 --tuned "$OUT/components-fmnist-small-tune/tuned.yaml"
$FB compare "$OUT/wd0/components-fmnist-small-tuned:A4" "$OUT/components-fmnist-small-tuned:A4" \
  "$OUT/components-fmnist-small-tuned:A3"

# 6. Each row at its tuned lr against itself at the paper's.
for row in FedAvg SCAFFOLD FedCM "Local Adam" FedAdam FedLADA "Local AdamW" FedAdamW; do
  $FB compare "$OUT/table1-fmnist-small-tuned:$row" "$OUT/table1-fmnist-small:$row"
done
