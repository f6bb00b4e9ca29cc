"""The detectors: one module per cause (or family of causes measured together), each `detect(facts, settings) ->
Found`, registered in diagnosis.detector_table."""
