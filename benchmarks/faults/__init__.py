"""Fault script: fedbench as an adversarial user and an unlucky machine would treat it.

Every case runs the real command line (`python -m fedbench ...`, this checkout first on the path)
in temporary folders and checks what the user would see:

- kills: SIGKILLs of a whole sweep (its process group) at seeded random moments, then a rerun to
  completion; the report must be byte-identical to an undisturbed sweep's.
- corruptions: a run killed right after its round-3 checkpoint, then its checkpoint, checksum
  file or metrics.jsonl damaged in one way each; the rerun must exit 0 with the metrics of an
  undisturbed run.
- bad inputs: malformed or hostile configs and flags, read-only and full disks (simulated by a
  `sitecustomize` that makes writes under one folder fail with EROFS or ENOSPC); each must end in
  exit code 2 and one line on stderr, no traceback, no temp file left, nothing written for a
  refused command, and (for the disk faults) a run that resumes to the undisturbed result.
- payloads: YAML python tags and pickles where fedbench reads YAML, checkpoints and arrays; each
  payload would create a marker file if it ran.
- paths: table and figure names that point outside --out; any file created outside --out counts.
- concurrency: two identical sweeps into one --out train each run once; two different sweeps
  sharing runs never report each other's plan.
- dataloss: kills and full disks while model.pt, a report or tuned.yaml is written, two tables
  whose names sanitise alike, a sweep under an ASCII locale; the previous complete file must
  survive and the rerun complete it ("LOST" marks a file destroyed).
- readback: damaged run files (summary.json, metrics.jsonl rows, attempt.json, a folder where a
  file belongs), plans, tuned.yaml and study.db; recovered (the run retrained to the undisturbed
  result) or one clean line.
- names: 300-character names, a 120 kB --set value, --out a file or below one, --write-plan a
  folder or read-only, compare FOLDER:ROW with ':' in FOLDER.
- interrupts: Ctrl-C (SIGINT to the process group) while train writes a checkpoint and in train,
  run, tune, figure and report: exit 130 and one line with a resume command.
- study: two tunes of one new study at once, a file-size limit while study.db grows, a 10**8-point
  grid and 10**9 trials (60 s each).
- bombs: an npz with a label of 10**9 or no samples, image_size=100000, samples_per_client=10**9,
  a figure with 10**9 trials (3 GB of memory, 60 s).
- api: the Python API with wrong types: a FedbenchError or a TypeError naming the argument.
- litter: stale temporaries and a finished run's leftover checkpoint cleaned by the rerun, a
  foreign run folder in a listing, an ENOSPC line naming its path.

Run from the checkout: python -m benchmarks.faults [--only kills,corruptions,...] [--kills 4]
[--keep] [--root DIR] (or python benchmarks/faults ...). One module per kind of fault below;
harness.py runs fedbench, inject.py simulates the disk faults, context.py holds the tally.
It prints one line per case, the counts and the failures by kind (tracebacks, data lost, hangs,
other); exit code 0 when every case held.
"""
