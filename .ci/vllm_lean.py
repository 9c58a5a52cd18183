"""Print a vLLM release's own requirements, lean: the Requires-Dist of its wheel (no
extras) less torch and the GPU-only packages its scheduler never imports. Used by
.ci/install-vllm for a release other than the pinned one (whose list is kept in
.ci/vllm-requirements.txt, the same filter applied to 0.34.0's wheel).

    python .ci/vllm_lean.py WHEEL > requirements.txt
"""

from __future__ import annotations

import re
import sys
import zipfile

# torch and its siblings (the CPU torch is installed first), GPU kernels and NVIDIA
# libraries, video codecs, compilers and tracing, the SDKs of servers and tools: none is
# imported on the path from vllm.config to the v1 Scheduler. Read off 0.33.0's wheel
# against what its scheduler imports; a release that needs one of them to build its
# Scheduler says so when imported (ModuleNotFoundError), and bench.vllm_releases adds it.
DROPPED = {
    "torch",
    "torchaudio",
    "torchvision",
    "torchcodec",
    "xformers",
    "triton",
    "flashinfer-python",
    "humming-kernels",
    "quack-kernels",
    "tilelang",
    "tokenspeed-mla",
    "apache-tvm-ffi",
    "nvidia-cudnn-frontend",
    "nvidia-cutlass-dsl",
    "nvtx",
    "pynvvideocodec",
    "opencv-python-headless",
    "numba",
    "depyf",
    "fastsafetensors",
    "instanttensor",
    "compressed-tensors",
    "outlines-core",
    "outlines",
    "lm-format-enforcer",
    "mistral-common",
    "anthropic",
    "mcp",
    "model-hosting-container-standards",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp",
    "opentelemetry-semantic-conventions-ai",
    "ray",
}


def name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ (]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def lean(wheel: str) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    wanted = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    return [r for r in wanted if "extra ==" not in r and name(r) not in DROPPED]


if __name__ == "__main__":
    print("\n".join(lean(sys.argv[1])))
