"""Input ranges of the workload model (the table in planner.workload's docstring), the token
length type and the pydantic settings every workload model shares."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

PAIRS_SUM_TOLERANCE = 1e-6
DEFAULT_SUPPORT_POINTS = 64

# Input ranges (see the module docstring).
MAX_TOKENS = 10_000_000  # the longest context windows shipped (Llama 4 Scout: 10M)
MAX_DISTRIBUTION_POINTS = 100_000
MAX_PERCENTILE_KEYS = 1_000
MAX_SAMPLES = 1_000_000
MAX_HISTOGRAM_WEIGHT = 1e15
MIN_REQUESTS_PER_S = 1e-7  # one request per ~116 days
MAX_REQUESTS_PER_S = 1e6
MIN_BUCKET_DURATION_S = 1e-3
MAX_BUCKET_DURATION_S = 1e7  # ~116 days
MAX_BUCKETS = 100_000
MIN_BURSTINESS = 1e-3
MAX_BURSTINESS = 1e6
# Clients of a closed loop (`vllm bench serve --max-concurrency`): beyond any replica set's
# max_num_seqs x replicas a planner would consider; the simulator holds a few dict entries each.
MAX_CLIENT_CONCURRENCY = 100_000
MAX_SAMPLED_REQUESTS = 10_000_000
MAX_HORIZON_S = 1e7
# Requests are generated lazily in chunks of this many (memory: ~24 bytes a request a chunk).
REQUEST_CHUNK = 65_536

Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]

MODEL_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

