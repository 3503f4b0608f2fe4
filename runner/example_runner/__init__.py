"""An example task runner to copy: see example_runner/http_call.py and README "Run your own work"."""
