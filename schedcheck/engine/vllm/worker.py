"""vLLM's worker process (engine/worker.py): vLLM imported, configured and warmed up before
the box, then driven inside it."""

from schedcheck.engine.vllm.adapter import ADAPTER
from schedcheck.engine.worker import serve

if __name__ == "__main__":
    serve(ADAPTER)
