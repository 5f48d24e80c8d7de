"""What every part of the loader runs on: where tables and checkpoints are kept, the jars,
the scheduler pools, stopping queries between batches, their progress reports, the process's
metrics, failure kinds, status files and the progress of long operations."""
