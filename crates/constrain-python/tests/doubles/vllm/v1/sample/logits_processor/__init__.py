"""Double of vllm.v1.sample.logits_processor (vLLM V1's custom logits
processor interface, docs.vllm.ai "Custom Logits Processors" and
vllm/v1/sample/logits_processor/interface.py): BatchUpdate's removed, added
(index, SamplingParams, prompt ids, live output ids) and moved (a, b,
direction) are processed in that order."""

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum, auto
from typing import Optional, Sequence


class MoveDirectionality(Enum):
    UNIDIRECTIONAL = auto()
    SWAP = auto()


@dataclass(frozen=True)
class BatchUpdate:
    batch_size: int
    removed: Sequence[int]
    added: Sequence[tuple]
    moved: Sequence[tuple]


class LogitsProcessor(ABC):
    @classmethod
    def validate_params(cls, sampling_params):
        return None

    @abstractmethod
    def __init__(self, vllm_config, device, is_pin_memory: bool) -> None:
        raise NotImplementedError

    @abstractmethod
    def apply(self, logits):
        raise NotImplementedError

    @abstractmethod
    def is_argmax_invariant(self) -> bool:
        raise NotImplementedError

    @abstractmethod
    def update_state(self, batch_update: Optional[BatchUpdate]) -> None:
        raise NotImplementedError
