"""nano-vllm's worker process (engine/worker.py): the checkout's sources read before the
box, its modules loaded from memory inside it."""

from schedcheck.engine.nanovllm.adapter import ADAPTER
from schedcheck.engine.worker import serve

if __name__ == "__main__":
    serve(ADAPTER)
