"""The clients' sample indices are uploaded to the device once; a client's are a view."""

import numpy as np
import pytest
import torch

from fedbench.engine.dispatch import OpCounter
from fedbench.engine.setup import ClientSamples


def test_a_client_is_a_view_of_one_upload_with_its_own_indices() -> None:
    parts = [np.array([5, 1, 9]), np.array([], dtype=np.int64), np.array([2, 7])]
    samples = ClientSamples(parts, torch.device("cpu"))
    assert len(samples) == 3
    assert samples[0].tolist() == [5, 1, 9] and samples[0].dtype == torch.int64
    assert samples[1].tolist() == [] and samples[2].tolist() == [2, 7]
    assert samples[-1].tolist() == [2, 7]
    # Reading a client copies nothing: it is a slice of the flat tensor.
    with OpCounter() as ops:
        got = samples[2]
    assert got.untyped_storage().data_ptr() == samples.flat.untyped_storage().data_ptr()
    assert set(ops.counts) <= {"slice"}
    with pytest.raises(IndexError):
        samples[3]
