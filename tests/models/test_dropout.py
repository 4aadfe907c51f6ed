"""``has_dropout``: pinned to what it claims, that two passes in training mode differ."""

import pytest
import torch
from transformers import BertConfig, BertModel, NomicBertConfig, NomicBertModel

from cselab.models.dropout import has_dropout

_SIZES = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              max_position_embeddings=64)


def _two_passes_differ(model: torch.nn.Module) -> bool:
    model.train()
    ids = torch.randint(0, 100, (3, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        first, second = model(input_ids=ids).last_hidden_state, model(input_ids=ids).last_hidden_state
    return not torch.equal(first, second)


@pytest.mark.parametrize(("family", "hidden", "attention"), [
    (BertConfig, 0.1, 0.1), (BertConfig, 0.0, 0.1), (BertConfig, 0.1, 0.0), (BertConfig, 0.0, 0.0),
    # NomicBERT keeps its attention dropout as a float, not an nn.Dropout: only that one draws masks here
    (NomicBertConfig, 0.0, 0.1), (NomicBertConfig, 0.0, 0.0),
])
def test_has_dropout_says_whether_two_training_passes_differ(family, hidden, attention):
    torch.manual_seed(0)
    config = family(hidden_dropout_prob=hidden, attention_probs_dropout_prob=attention, **_SIZES)
    model = (BertModel if family is BertConfig else NomicBertModel)(config)
    assert has_dropout(model) == _two_passes_differ(model) == (hidden > 0 or attention > 0)
