"""SGLang's worker process (engine/worker.py): SGLang imported, its scheduler built and
warmed up before the box, then driven inside it."""

from schedcheck.engine.sglang.adapter import ADAPTER
from schedcheck.engine.worker import serve

if __name__ == "__main__":
    serve(ADAPTER)
