"""Answers already computed, by request bytes. Every RPC is a pure function of its request (same
input, same output, byte for byte), so a repeated request is answered from memory instead of
taking a worker. Bounded by bytes, least recently used out first. Answers shaped by the call's
deadline (a Plan whose solver limit the deadline cut) are not stored."""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["ResponseCache"]


class ResponseCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def _size(key: tuple[str, bytes], value: bytes) -> int:
        return len(key[1]) + len(value) + 200  # plus the bookkeeping, roughly

    def get(self, key: tuple[str, bytes]) -> bytes | None:
        if self.max_bytes <= 0:
            return None
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: tuple[str, bytes], value: bytes) -> None:
        size = self._size(key, value)
        if size > self.max_bytes // 4:  # one huge answer must not flush everything else
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= self._size(key, old)
            self._entries[key] = value
            self._bytes += size
            while self._bytes > self.max_bytes and self._entries:
                k, v = self._entries.popitem(last=False)
                self._bytes -= self._size(k, v)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        return self._bytes
