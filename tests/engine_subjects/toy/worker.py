"""The toy engine's worker process (schedcheck/engine/worker.py)."""

from schedcheck.engine.worker import serve
from tests.engine_subjects.toy.adapter import ADAPTER

if __name__ == "__main__":
    serve(ADAPTER)
