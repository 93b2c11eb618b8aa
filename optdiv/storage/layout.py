"""The names of the files optdiv writes, here once: a run directory's (the store, the engine's ``run``, ``optdiv
show``) and a bench directory's (the harness, ``optdiv report``, ``optdiv show``'s hint)."""

#: Settings of the run, written once; a resumed run must match them.
META_NAME = "meta.json"
#: One JSON object per observation (no predictions inline), append-only.
LOG_NAME = "observations.jsonl"
#: Every evaluation issued, before it starts (one JSON line each, append-only, fsynced).
ISSUED_NAME = "issued.jsonl"
#: Folder of the observations' prediction arrays.
PREDS_DIR = "preds"
#: The validation targets, in ``preds/`` (absent from run directories written before they were kept).
TARGETS_NAME = "y_val.npy"
#: Folder of the fitted pipelines the evaluator saved (optdiv.evaluation.pipelines); a run without it still
#: resumes, its final model is then refitted.
MODELS_DIR = "models"
#: The summary of a finished search (optdiv.engine.result.result_summary).
RESULT_NAME = "result.json"
#: The final model, pickled with joblib (``optdiv predict`` reads it).
MODEL_NAME = "model.joblib"

#: A bench directory: one row per finished run (rebuilt from the runs on start).
RESULTS_NAME = "results.csv"
#: A bench directory: the bench's settings, checked on resume.
BENCH_NAME = "bench.json"
#: A bench run's per-checkpoint trace (optdiv.bench.trace), beside its ``result.json``.
TRACE_NAME = "trace.csv"
