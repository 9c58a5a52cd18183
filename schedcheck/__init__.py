"""schedcheck: property-based verification of LLM-serving schedulers (P07).

The command (`schedcheck`, schedcheck/cli/) and the pytest plugin (`schedcheck.plugin`) are
what most users run. A course's own tests or a CI script use this API:

    from schedcheck import Workload, open_impl, verify

    impl = open_impl("mine/p07_scheduler.py")  # isolated in a worker of its own
    verdict = verify(impl, Workload.from_json(text))
    assert verdict.ok, verdict.report()
    impl.stop()

The rooms, bottom up (tests/product/test_layers.py holds each to importing only those below it):
`faults`, `layout` and `scheduler` (the reference) import nothing of ours; then `sandbox`
(a worker in a box), `model` (workloads and traces), `invariants` (the checks),
`strategies` (what to try), `drive` (running an implementation), `verdict` (one
workload's verdict and report), `search`, `suite` (the properties as pytest tests),
`grading`, `engine` (real engines: nano-vllm's, vLLM's, through adapters), `plugin` and `cli`.
"""

from importlib.metadata import version

from schedcheck.drive.impl import Implementation, InProcess, open_impl
from schedcheck.faults import CheckerError, CheckFailed, SubmissionError
from schedcheck.invariants.checks import CHECKS
from schedcheck.model.tokens import TokenModel
from schedcheck.model.trace import State, Step, Trace
from schedcheck.model.workload import Config, Request, Workload
from schedcheck.verdict.verify import Verdict, verify, verify_pair

__version__ = version("schedcheck")  # one place: pyproject.toml

__all__ = [
    "CHECKS",
    "CheckFailed",
    "CheckerError",
    "Config",
    "Implementation",
    "InProcess",
    "Request",
    "State",
    "Step",
    "SubmissionError",
    "TokenModel",
    "Trace",
    "Verdict",
    "Workload",
    "__version__",
    "open_impl",
    "verify",
    "verify_pair",
]
