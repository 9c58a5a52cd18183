"""A correct scheduler whose set-up asserts the block size is a multiple of its kernel's
page (PAGE, here 4; a test writes other pages): run with the block sizes it accepts, read
off trial builds (issue 53)."""

# replaces nanovllm/engine/scheduler.py
from nanovllm.engine._correct_scheduler import Scheduler as _Scheduler

PAGE = 4


class Scheduler(_Scheduler):
    def __init__(self, config):
        assert config.kvcache_block_size % PAGE == 0, "block size: a multiple of the page"
        super().__init__(config)
