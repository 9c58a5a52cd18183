"""What to try: Hypothesis strategies for configs, workloads and token models."""
