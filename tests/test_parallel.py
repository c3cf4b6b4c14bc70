"""Data-parallel training (tcrformer.training.parallel): the full batch's gradient on every
rank, each rank's own dropout, identical weights on every rank, and a killed run resumed."""

from __future__ import annotations

import pytest
import torch

from tcrformer.core.io import ResultFileError
from tcrformer.training.checkpoints import checkpoint_path
from tcrformer.training.loop import train
from tcrformer.training.ranks import Workers
from tcrformer.training.recipe import recipe_from_config, with_overrides
from tcrformer.training.shard import Shard

from conftest import default_config

torch.set_num_threads(1)
TINY = dict(d_model=16, num_heads=2, d_ff=32, num_layers=1, cross_attention_layer=1, steps=6,
            batch_size=16, warmup=3, log_every=100, device="cpu", checkpoint_every=3)  # fmt: skip


def tiny(**changes):
    return with_overrides(recipe_from_config(default_config()["reversal"]), **{**TINY, **changes})


def test_two_ranks_take_the_full_batchs_gradient():
    """Without dropout the two ranks' summed gradient is the full batch's: the same losses
    and weights as one rank, up to the rounding of a sum split in two. Not the key
    projections' biases: softmax ignores a constant added to every score of a row, so their
    true gradient is 0 and Adam turns the rounding noise they get into steps of full size."""
    recipe = tiny(dropout=0.0)
    one, two = train(recipe), train(recipe, ranks=2)
    assert torch.allclose(one.losses, two.losses, rtol=1e-5, atol=1e-6)
    for name, a in one.model.state_dict().items():
        if not name.endswith("w_k.bias"):
            assert torch.allclose(a, two.model.state_dict()[name], rtol=1e-3, atol=1e-5), name
    assert two.timing["ranks"] == 2


def test_each_rank_draws_its_own_dropout():
    """With dropout the two ranks' masks differ from one rank's stream: other losses."""
    recipe = tiny(dropout=0.3)
    assert not torch.equal(train(recipe).losses, train(recipe, ranks=2).losses)


def test_the_rows_and_the_shares_sum_to_the_batch():
    src = torch.tensor([[3, 4, 0], [5, 0, 0], [6, 7, 8]])
    tgt = torch.tensor([[1, 4, 3, 2, 0], [1, 5, 2, 0, 0], [1, 8, 7, 6, 2]])
    shares = []
    for rank in range(2):
        mine_src, _, share = Shard(rank, 2).rows(src, tgt)
        assert mine_src.tolist() == src[rank::2].tolist()
        shares.append(float(share))
    assert sum(shares) == pytest.approx(1.0) and shares[0] == pytest.approx(7 / 9)  # 3 + 4 of 9


def test_a_killed_two_rank_run_resumes_to_the_same_weights(tmp_path):
    """Stopped at its checkpoint (step 3) and restarted, a two-rank run ends where an
    uninterrupted one does, bit for bit: every rank's dropout stream is in the checkpoint."""
    recipe = tiny(dropout=0.2)
    whole = train(recipe, ranks=2)
    half = with_overrides(recipe, steps=3)
    train(half, ranks=2, checkpoint_dir=tmp_path)  # leaves no checkpoint: it finished
    assert not checkpoint_path(tmp_path, recipe).exists()

    class Stop(Exception):
        pass

    def stop_after_the_checkpoint(step):
        if step == 4:
            raise Stop

    with pytest.raises(Stop):
        train(recipe, ranks=2, checkpoint_dir=tmp_path, on_step=stop_after_the_checkpoint)
    assert checkpoint_path(tmp_path, recipe).exists()
    resumed = train(recipe, ranks=2, checkpoint_dir=tmp_path)
    assert resumed.timing["resumed_from_step"] == 3
    assert torch.equal(resumed.losses, whole.losses)
    for name, value in whole.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


def test_a_checkpoint_of_another_rank_count_is_refused(tmp_path):
    recipe = tiny()

    def stop(step):
        if step == 4:
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        train(recipe, checkpoint_dir=tmp_path, on_step=stop)  # one rank, checkpoint at 3
    with pytest.raises(ResultFileError, match="checkpoint of 1 ranks, resumed with 2"):
        train(recipe, ranks=2, checkpoint_dir=tmp_path)


def test_ranks_started_before_rank_0_train_the_same_run():
    """Ranks 1..R-1 started early (as the rule script does, before it imports torch) train
    the run that ranks started by train itself train, bit for bit."""
    recipe = tiny(dropout=0.2)
    early = train(recipe, ranks=2, workers=Workers.start(recipe, 2, torch.get_num_threads()))
    late = train(recipe, ranks=2)
    assert torch.equal(early.losses, late.losses)
    for name, value in late.model.state_dict().items():
        assert torch.equal(value, early.model.state_dict()[name]), name


def test_started_ranks_of_another_recipe_are_refused_and_end_with_rank_0():
    """Ranks started for another recipe or rank count are refused before any step, and a
    rank 0 that fails leaves no rank behind, and no folder."""
    for started, recipe in ((Workers.start(tiny(seed=1), 2, 1), tiny()),
                            (Workers.start(tiny(), 3, 1), tiny())):  # fmt: skip
        with pytest.raises(ValueError, match="ranks started train another recipe"):
            train(recipe, ranks=2, workers=started)
        assert all(p.poll() is not None for p in started.processes)
        assert not started.store.parent.exists()


@pytest.mark.parametrize("ranks", [1, 2])
def test_on_loss_sees_every_steps_loss_on_the_first_rank(ranks):
    """The curve monitor's hook: on_loss(step, loss) after every step, with the loss the
    training records (the full batch's over two ranks)."""
    seen = []
    trained = train(tiny(), ranks=ranks, on_loss=lambda step, loss: seen.append((step, loss)))
    assert [step for step, _ in seen] == list(range(1, 7))
    assert torch.equal(torch.stack([loss for _, loss in seen]), trained.losses)
