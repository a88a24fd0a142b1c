"""Put first on the PYTHONPATH of a child process: its ``sitecustomize`` hides modules."""
