"""The reduce: every rank's outcome -> one job: which ranks belong together, which are missing, and the Report.
Pure."""
