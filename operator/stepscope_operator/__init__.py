"""stepscope operator: kopf handlers over pure functions."""
