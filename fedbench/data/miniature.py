"""Miniature copies of the on-disk datasets, in their real formats, for tests and `quick` presets:
a tiny-imagenet-200 folder (JPEGs, wnids.txt, val_annotations.txt) and GLUE task folders (the
GLUE TSV layouts) with a tiny word-level RoBERTa-style tokenizer (<s>=0, <pad>=1, </s>=2).

The contents are seeded and learnable (each class has its own colour / its own words), so a few
rounds of training move the accuracy. `data.path: miniature` makes tinyimagenet and glue/<task>
write them under data.root/miniature on first use; `python -m fedbench.data.miniature DIR`
writes them explicitly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

WORDS_BY_CLASS = [
    ["good", "great", "fine", "nice", "happy"],
    ["bad", "awful", "poor", "sad", "ugly"],
    ["maybe", "perhaps", "unclear", "some", "other"],
]
FILLER = ["the", "a", "movie", "cat", "is", "was", "very", "and", "this", "it", "what", "why"]
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def write_tiny_imagenet(
    root: Path,
    *,
    classes: int = 4,
    train_per_class: int = 12,
    val_per_class: int = 4,
    size: int = 16,
) -> Path:
    """root/tiny-imagenet-200 in the real layout (idempotent); returns the folder."""
    from PIL import Image

    folder = Path(root) / "tiny-imagenet-200"
    if (folder / "wnids.txt").is_file():
        return folder
    rng = np.random.default_rng(0)
    wnids = [f"n{i:08d}" for i in range(classes)]
    colours = rng.integers(0, 256, size=(classes, 3))

    def image(c: int) -> Image.Image:
        noise = rng.normal(0, 40, size=(size, size, 3))
        return Image.fromarray(np.clip(colours[c] + noise, 0, 255).astype(np.uint8))

    annotations = []
    for c, wnid in enumerate(wnids):
        images = folder / "train" / wnid / "images"
        images.mkdir(parents=True, exist_ok=True)
        for i in range(train_per_class):
            image(c).save(images / f"{wnid}_{i}.JPEG", quality=95)
        (folder / "train" / wnid / f"{wnid}_boxes.txt").write_text("")
        for i in range(val_per_class):
            annotations.append((f"val_{c * val_per_class + i}.JPEG", wnid))
    (folder / "val" / "images").mkdir(parents=True, exist_ok=True)
    for name, wnid in annotations:
        image(wnids.index(wnid)).save(folder / "val" / "images" / name, quality=95)
    (folder / "val" / "val_annotations.txt").write_text(
        "".join(f"{n}\t{w}\t0\t0\t{size - 1}\t{size - 1}\n" for n, w in annotations)
    )
    (folder / "wnids.txt").write_text("".join(f"{w}\n" for w in wnids))  # written last: complete
    return folder


def write_tokenizer(folder: Path) -> Path:
    """A word-level tokenizer over the generator's words with RoBERTa's specials and templates."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    if (folder / "tokenizer.json").is_file():
        return folder
    words = [w for ws in WORDS_BY_CLASS for w in ws] + FILLER + ["?", "."]
    vocab = {w: i for i, w in enumerate(SPECIALS + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        cls_token="<s>",
        sep_token="</s>",
    )
    fast.save_pretrained(str(folder))
    return folder


def _sentence(rng: np.random.Generator, label: int) -> str:
    words = list(rng.choice(FILLER, size=int(rng.integers(3, 8))))
    for _ in range(2):
        words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(WORDS_BY_CLASS[label])))
    return " ".join(words)


#: One TSV row per GLUE task in the download's column layout, from (index, label, sentence a,
#: sentence b, n); also the tasks this module can write.
ROW_FORMATS = {
    "cola": lambda i, y, a, b, n: f"src{i}\t{y}\t{'' if y else '*'}\t{a}",
    "sst2": lambda i, y, a, b, n: f"{a}\t{y}",
    "mrpc": lambda i, y, a, b, n: f"{y}\t{i}\t{i + n}\t{a}\t{b}",
    "qqp": lambda i, y, a, b, n: f"{i}\t{i}\t{i + n}\t{a} ?\t{b} ?\t{y}",
    "qnli": lambda i, y, a, b, n: f"{i}\t{a} ?\t{b}\t{NLI_LABELS[y]}",
    "rte": lambda i, y, a, b, n: f"{i}\t{a}\t{b}\t{NLI_LABELS[y]}",
    "mnli": lambda i, y, a, b, n: f"{i}\tfiction\t{a}\t{b}\t{MNLI_LABELS[y]}",
}
HEADERS = {
    "cola": None,
    "sst2": "sentence\tlabel",
    "mrpc": "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String",
    "qqp": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
    "qnli": "index\tquestion\tsentence\tlabel",
    "rte": "index\tsentence1\tsentence2\tlabel",
    "mnli": "index\tgenre\tsentence1\tsentence2\tgold_label",
}
NLI_LABELS: dict[int, str] = {0: "entailment", 1: "not_entailment"}
MNLI_LABELS: dict[int, str] = {0: "entailment", 1: "neutral", 2: "contradiction"}


def _rows(task: str, n: int, seed: int) -> tuple[str | None, list[str]]:
    rng = np.random.default_rng(seed)
    classes = 3 if task == "mnli" else 2
    rows = []
    for i in range(n):
        y = int(rng.integers(0, classes))
        a, b = _sentence(rng, y), _sentence(rng, int(rng.integers(0, classes)))
        rows.append(ROW_FORMATS[task](i, y, a, b, n))
    return HEADERS[task], rows


def write_glue(glue_root: Path, task: str, *, n_train: int = 160, n_dev: int = 48) -> Path:
    """glue_root/<task>/ with train.tsv and dev.tsv (MNLI: dev_matched.tsv), and
    glue_root/tokenizer/; idempotent. Returns the task folder."""
    glue_root = Path(glue_root)
    write_tokenizer(glue_root / "tokenizer")
    folder = glue_root / task
    dev = "dev_matched.tsv" if task == "mnli" else "dev.tsv"
    if (folder / dev).is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for name, n, seed in (("train.tsv", n_train, 0), (dev, n_dev, 1)):
        header, rows = _rows(task, n, seed)
        lines = ([header] if header else []) + rows
        (folder / name).write_text("".join(f"{line}\n" for line in lines))
    return folder


def main(argv: list[str]) -> None:
    root = Path(argv[0] if argv else "miniature")
    write_tiny_imagenet(root)
    for task in ROW_FORMATS:
        write_glue(root / "glue", task)
    print(f"wrote {root}/tiny-imagenet-200 and {root}/glue/<task> for {', '.join(ROW_FORMATS)}")


if __name__ == "__main__":
    main(sys.argv[1:])
