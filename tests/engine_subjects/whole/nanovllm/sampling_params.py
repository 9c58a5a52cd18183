from dataclasses import dataclass


@dataclass
class SamplingParams:
    """Per-request sampling options."""

    temperature: float = 1.0
    max_tokens: int = 64
    ignore_eos: bool = False

    def __post_init__(self):
        assert self.temperature > 0, "temperature must be > 0"
