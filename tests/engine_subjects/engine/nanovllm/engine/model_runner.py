import pickle
from multiprocessing.shared_memory import SharedMemory
from multiprocessing.synchronize import Event

import torch
import torch.distributed as dist
from nanovllm.config import Config
from nanovllm.engine.sequence import Sequence
from nanovllm.layers.sampler import Sampler
from nanovllm.models.toy import ToyForCausalLM
from nanovllm.utils.context import reset_context, set_context


class ModelRunner:
    """One rank's model: rank 0 sends each call to the others through shared memory."""

    def __init__(self, config: Config, rank: int, event: Event | list[Event]):
        self.config = config
        self.block_size = config.kvcache_block_size
        self.world_size = config.tensor_parallel_size
        self.rank = rank
        self.event = event
        dist.init_process_group(
            "nccl", "tcp://localhost:2333", world_size=self.world_size, rank=rank
        )
        torch.cuda.set_device(rank)
        torch.set_default_device("cuda")
        self.model = ToyForCausalLM(config.hf_config)
        self.sampler = Sampler()
        self.warmup_model()
        self.allocate_kv_cache()
        torch.set_default_device("cpu")
        if self.world_size > 1:
            if rank == 0:
                self.shm = SharedMemory(name="toyengine", create=True, size=2**20)
                dist.barrier()
            else:
                dist.barrier()
                self.shm = SharedMemory(name="toyengine")
                self.loop()

    def exit(self):
        if self.world_size > 1:
            self.shm.close()
            dist.barrier()
            if self.rank == 0:
                self.shm.unlink()
        torch.cuda.synchronize()
        dist.destroy_process_group()

    def loop(self):
        while True:
            method_name, args = self.read_shm()
            self.call(method_name, *args)
            if method_name == "exit":
                break

    def read_shm(self):
        assert self.world_size > 1 and self.rank > 0
        self.event.wait()
        n = int.from_bytes(self.shm.buf[0:4], "little")
        method_name, *args = pickle.loads(self.shm.buf[4 : n + 4])
        self.event.clear()
        return method_name, args

    def write_shm(self, method_name, *args):
        assert self.world_size > 1 and self.rank == 0
        data = pickle.dumps([method_name, *args])
        n = len(data)
        self.shm.buf[0:4] = n.to_bytes(4, "little")
        self.shm.buf[4 : n + 4] = data
        for event in self.event:
            event.set()

    def call(self, method_name, *args):
        if self.world_size > 1 and self.rank == 0:
            self.write_shm(method_name, *args)
        return getattr(self, method_name)(*args)

    def warmup_model(self):
        torch.cuda.empty_cache()
        seqs = [Sequence([0] * self.config.max_model_len)]
        seqs[0].num_scheduled_tokens = len(seqs[0])
        self.run(seqs, True)

    def allocate_kv_cache(self):
        free, _ = torch.cuda.mem_get_info()
        hf = self.config.hf_config
        block_bytes = 2 * hf.num_hidden_layers * self.block_size * hf.hidden_size * 2
        self.config.num_kvcache_blocks = int(free * 0.9) // block_bytes
        self.kv_cache = torch.empty(
            2, self.config.num_kvcache_blocks, self.block_size, hf.hidden_size
        )

    def prepare_block_tables(self, seqs):
        width = max(len(seq.block_table) for seq in seqs)
        tables = [seq.block_table + [-1] * (width - len(seq.block_table)) for seq in seqs]
        return torch.tensor(tables, dtype=torch.int32, pin_memory=True).cuda(non_blocking=True)

    def slot(self, seq, position):
        block = seq.block_table[position // self.block_size]
        return block * self.block_size + position % self.block_size

    def prepare_prefill(self, seqs):
        input_ids, positions, slot_mapping = [], [], []
        cu_seqlens_q, cu_seqlens_k = [0], [0]
        for seq in seqs:
            start = seq.num_cached_tokens
            end = start + seq.num_scheduled_tokens
            input_ids.extend(seq[start:end])
            positions.extend(range(start, end))
            cu_seqlens_q.append(cu_seqlens_q[-1] + end - start)
            cu_seqlens_k.append(cu_seqlens_k[-1] + end)
            if seq.block_table:  # none in the warm-up
                slot_mapping.extend(self.slot(seq, p) for p in range(start, end))
        block_tables = None
        if cu_seqlens_k[-1] > cu_seqlens_q[-1]:  # a cached prefix, read from the cache
            block_tables = self.prepare_block_tables(seqs)
        set_context(
            True,
            torch.tensor(cu_seqlens_q, dtype=torch.int32, pin_memory=True).cuda(non_blocking=True),
            torch.tensor(cu_seqlens_k, dtype=torch.int32, pin_memory=True).cuda(non_blocking=True),
            torch.tensor(slot_mapping, dtype=torch.int32, pin_memory=True).cuda(non_blocking=True),
            None,
            block_tables,
        )
        return (
            torch.tensor(input_ids, dtype=torch.int64, pin_memory=True).cuda(non_blocking=True),
            torch.tensor(positions, dtype=torch.int64, pin_memory=True).cuda(non_blocking=True),
        )

    def prepare_decode(self, seqs):
        input_ids = [seq.last_token for seq in seqs]
        positions = [len(seq) - 1 for seq in seqs]
        slot_mapping = [
            seq.block_table[-1] * self.block_size + seq.last_block_num_tokens - 1 for seq in seqs
        ]
        context_lens = [len(seq) for seq in seqs]
        set_context(
            False,
            slot_mapping=torch.tensor(slot_mapping, dtype=torch.int32, pin_memory=True).cuda(
                non_blocking=True
            ),
            context_lens=torch.tensor(context_lens, dtype=torch.int32, pin_memory=True).cuda(
                non_blocking=True
            ),
            block_tables=self.prepare_block_tables(seqs),
        )
        return (
            torch.tensor(input_ids, dtype=torch.int64, pin_memory=True).cuda(non_blocking=True),
            torch.tensor(positions, dtype=torch.int64, pin_memory=True).cuda(non_blocking=True),
        )

    def prepare_sample(self, seqs):
        temperatures = [seq.temperature for seq in seqs]
        return torch.tensor(temperatures, dtype=torch.float32, pin_memory=True).cuda(
            non_blocking=True
        )

    @torch.inference_mode()
    def run(self, seqs: list[Sequence], is_prefill: bool) -> list[int]:
        prepare = self.prepare_prefill if is_prefill else self.prepare_decode
        input_ids, positions = prepare(seqs)
        temperatures = self.prepare_sample(seqs) if self.rank == 0 else None
        logits = self.model.compute_logits(self.model(input_ids, positions))
        token_ids = self.sampler(logits, temperatures).tolist() if self.rank == 0 else None
        reset_context()
        return token_ids
