"""A correct runner that looks for a free TCP port on localhost while it is built (the
registry derivatives' `find_available_port` from 2333) and connects to it, as a rendezvous
would: in the box's network namespace, whose loopback is up and whose /etc/hosts names
localhost, it does (issue 53)."""

# replaces nanovllm/engine/model_runner.py
import socket

from nanovllm.engine._correct_model_runner import ModelRunner as _ModelRunner


def find_available_port(start=2333, attempts=100):
    for port in range(start, start + attempts):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("localhost", port))
                s.listen()
                with socket.create_connection(("localhost", port), timeout=5):
                    return port
        except OSError:
            continue
    raise RuntimeError(f"no available port from {start} after {attempts} attempts")


class ModelRunner(_ModelRunner):
    def __init__(self, config, rank, event):
        self.port = find_available_port()
        super().__init__(config, rank, event)
