"""Both model families against the encoder-decoder contract: invariants, golden values, toy task."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from conftest import step_by_step_logits

from nmt.config import SHARED_MODEL_KEYS, ModelConfig, families, from_dict
from nmt.errors import ConfigError
from nmt.models.attention import MultiHeadAttention
from nmt.models.base import EncoderDecoder, select_rows
from nmt.models.build import build_model, count_parameters
from nmt.models.transformer import sinusoidal_positions

PAD, BOS, EOS = 1, 2, 3
V_SRC, V_TGT = 19, 23

VARIANTS = {
    "gru": dict(arch="gru"),
    "gru-bi": dict(arch="gru", bidirectional=True, hidden=8),
    "transformer": dict(arch="transformer"),
    "transformer-prenorm": dict(arch="transformer", norm_first=True, attn_bias=True),
}


def tiny(arch: str = "transformer", **kw: object) -> ModelConfig:
    """A small config of ``arch``; the settings of other families in ``kw`` are left out."""
    base = dict(d_model=16, hidden=12, n_layers=2, n_heads=4, d_ff=16, dropout=0.0)
    base.update(kw)
    own = {*SHARED_MODEL_KEYS, *(f.name for f in dataclasses.fields(families()[arch].settings))}
    return ModelConfig(arch, **{k: v for k, v in base.items() if k in own})


def make(variant: str, seed: int = 0, **kw: object) -> EncoderDecoder:
    torch.manual_seed(seed)
    cfg = tiny(**{**VARIANTS[variant], **kw})  # type: ignore[arg-type]
    return build_model(cfg, V_SRC, V_TGT)


def batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """src (3, 7) padded after each length, src_lengths (3,), tgt (3, 6)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 3, 5])
    src = torch.randint(4, V_SRC, (3, 7), generator=g)
    src[torch.arange(7)[None, :] >= lengths[:, None]] = PAD
    tgt = torch.randint(4, V_TGT, (3, 6), generator=g)
    return src, lengths, tgt


def full_logits(model: EncoderDecoder, src: torch.Tensor, lengths: torch.Tensor,
                tgt: torch.Tensor) -> torch.Tensor:
    return model.decode(tgt, model.encode(src, lengths)).logits


ALL = list(VARIANTS)


@pytest.mark.parametrize("variant", ALL)
def test_shapes_and_batch_first_memory_and_state(variant: str) -> None:
    model = make(variant).eval()
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths)
    state = model.init_state(memory)
    out = model.decode(tgt, memory)
    assert out.logits.shape == (3, 6, V_TGT) and out.state is None and out.weights == {}
    assert all(v.shape[0] == 3 for v in [*memory.values(), *state.values()])
    step = model.decode(tgt[:, :1], memory, state)
    assert step.logits.shape == (3, 1, V_TGT) and step.state is not None
    assert set(step.state) == set(state)
    torch.testing.assert_close(model(src, lengths, tgt), out.logits)


@pytest.mark.parametrize("variant", ALL)
def test_extra_padding_changes_nothing(variant: str) -> None:
    model = make(variant).eval()
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths)
    padded_src = F.pad(src, (0, 4), value=PAD)
    padded_memory = model.encode(padded_src, lengths)
    torch.testing.assert_close(padded_memory["enc_out"][:, :7], memory["enc_out"])
    torch.testing.assert_close(
        model.decode(tgt, padded_memory).logits, model.decode(tgt, memory).logits
    )
    # padding the target adds positions after the real ones and leaves those unchanged
    padded_tgt = F.pad(tgt, (0, 3), value=PAD)
    torch.testing.assert_close(
        model.decode(padded_tgt, memory).logits[:, :6], model.decode(tgt, memory).logits
    )


@pytest.mark.parametrize("variant", ALL)
def test_batched_with_a_longer_sentence_equals_alone(variant: str) -> None:
    model = make(variant).eval()
    src, lengths, tgt = batch()
    for row in (1, 2):  # the shorter sentences, alone at their own length
        n = int(lengths[row])
        alone_memory = model.encode(src[row : row + 1, :n], lengths[row : row + 1])
        batched_memory = model.encode(src, lengths)
        torch.testing.assert_close(batched_memory["enc_out"][row, :n],
                                   alone_memory["enc_out"][0])
        alone = full_logits(model, src[row : row + 1, :n], lengths[row : row + 1],
                            tgt[row : row + 1])
        torch.testing.assert_close(full_logits(model, src, lengths, tgt)[row], alone[0])


@pytest.mark.parametrize("train", [False, True])
@pytest.mark.parametrize("variant", ALL)
def test_future_target_tokens_do_not_change_earlier_logits(variant: str, train: bool) -> None:
    model = make(variant).train(train)  # dropout 0: train mode is deterministic here
    src, lengths, tgt = batch()
    changed = tgt.clone()
    changed[:, 3:] = (changed[:, 3:] + 1 - 4) % (V_TGT - 4) + 4
    a, b = full_logits(model, src, lengths, tgt), full_logits(model, src, lengths, changed)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


@pytest.mark.parametrize("variant", ALL)
def test_incremental_decoding_equals_full_pass(variant: str) -> None:
    model = make(variant).eval()
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths)
    full = model.decode(tgt, memory).logits
    torch.testing.assert_close(step_by_step_logits(model, memory, tgt), full, atol=1e-5,
                               rtol=1e-4)
    # a prefix of two positions, then the rest in one call, lands on the same logits
    first = model.decode(tgt[:, :2], memory, model.init_state(memory))
    assert first.state is not None
    rest = model.decode(tgt[:, 2:], memory, first.state)
    torch.testing.assert_close(torch.cat([first.logits, rest.logits], 1), full,
                               atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("variant", ALL)
def test_select_rows_reorders_memory_and_state(variant: str) -> None:
    model = make(variant).eval()
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths)
    state = model.decode(tgt[:, :2], memory, model.init_state(memory)).state
    assert state is not None
    index = torch.tensor([2, 0, 0])
    picked = model.decode(tgt[index, 2:3], select_rows(memory, index), select_rows(state, index))
    whole = model.decode(tgt[:, 2:3], memory, state)
    torch.testing.assert_close(picked.logits, whole.logits[index])


def test_transformer_cache_grows_by_one_projected_position() -> None:
    model = make("transformer").eval()
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths)
    state = model.init_state(memory)
    # (B, heads, t, d_head): head-major
    assert state["self_k0"].shape == (3, 4, 0, 4) and state["cross_v1"].shape == (3, 4, 7, 4)
    for t in range(3):
        out = model.decode(tgt[:, t : t + 1], memory, state)
        assert out.state is not None
        state = out.state
        assert state["self_k1"].shape == (3, 4, t + 1, 4)
    assert memory["src_mask"].dtype == torch.bool and memory["src_mask"].shape == (3, 7)


def test_gru_state_holds_hidden_and_projected_keys() -> None:
    model = make("gru").eval()
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths)
    state = model.init_state(memory)
    assert state["hidden"].shape == (3, 2, 12) and state["keys"].shape == (3, 7, 12)
    torch.testing.assert_close(state["hidden"], memory["enc_hidden"])


def test_sinusoidal_golden_value_and_odd_width() -> None:
    table = sinusoidal_positions(3, 4)
    torch.testing.assert_close(table[1], torch.tensor([0.8415, 0.5403, 0.0100, 0.9999]),
                               atol=1e-4, rtol=0)
    torch.testing.assert_close(table[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))
    odd = sinusoidal_positions(5, 5)
    assert odd.shape == (5, 5)
    torch.testing.assert_close(odd[:, :4], sinusoidal_positions(5, 4)[:, :4], atol=0.1, rtol=0)
    model = build_model(tiny(d_model=15, n_heads=3), 9, 9)
    assert model(torch.tensor([[4, 3]]), torch.tensor([2]), torch.tensor([[2, 5]])).shape[-1] == 9


@pytest.mark.parametrize("variant", ALL)
def test_attention_weights_shapes_rows_sum_to_one_and_same_logits(variant: str) -> None:
    model = make(variant).eval()
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths, need_weights=True)
    out = model.decode(tgt, memory, need_weights=True)
    torch.testing.assert_close(out.logits, model.decode(tgt, memory).logits)
    weights = dict(out.weights)
    if variant.startswith("transformer"):
        weights["enc"] = memory["attn_enc"]
        assert weights["enc"].shape == (3, 2, 4, 7, 7)
        assert weights["self"].shape == (3, 2, 4, 6, 6)
        assert weights["cross"].shape == (3, 2, 4, 6, 7)
        assert torch.triu(weights["self"], diagonal=1).abs().max() == 0
    else:
        assert set(weights) == {"cross"} and weights["cross"].shape == (3, 1, 1, 6, 7)
    for w in weights.values():
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    assert weights["cross"][1, ..., 3:].abs().max() == 0  # source row 1 has length 3


@pytest.mark.parametrize("arch", ["gru", "transformer"])
def test_tied_embeddings_share_storage(arch: str) -> None:
    cfg = tiny(arch, hidden=16, tie_embeddings=True)
    model = build_model(cfg, 11, 11, joint_vocab=True)
    ptr = model.out.weight.data_ptr()
    assert model.tgt_embed.weight.data_ptr() == ptr and model.src_embed.weight.data_ptr() == ptr
    untied = build_model(dataclasses.replace(cfg, tie_embeddings=False), 11, 11, joint_vocab=True)
    assert count_parameters(untied) - count_parameters(model) == 2 * 11 * 16
    separate = build_model(cfg, 11, 13, joint_vocab=False)
    assert separate.tgt_embed.weight.data_ptr() == separate.out.weight.data_ptr()
    assert separate.src_embed.weight.data_ptr() != separate.out.weight.data_ptr()


def test_user_errors_name_the_option() -> None:
    with pytest.raises(ConfigError, match="tie_embeddings"):
        build_model(tiny("gru", hidden=8, tie_embeddings=True), 9, 9)
    with pytest.raises(ConfigError, match="joint"):
        build_model(tiny(), 9, 10, joint_vocab=True)
    with pytest.raises(ConfigError, match="n_heads"):
        build_model(tiny(n_heads=3), 9, 9)
    model = build_model(tiny(max_positions=4), 9, 9)
    with pytest.raises(ConfigError, match="max_positions"):
        model.encode(torch.full((1, 5), 4), torch.tensor([5]))


def test_xavier_init_bounds() -> None:
    model = build_model(tiny(d_model=16, d_ff=32), 9, 9)
    bound = (6 / (16 + 16)) ** 0.5  # each of the fused q/k/v blocks is a (16, 16) matrix
    in_proj = model.enc_layers[0].self_attn.in_proj.weight
    assert in_proj.abs().max() <= bound and in_proj.abs().max() > 0.9 * bound
    default = build_model(tiny(d_model=16, d_ff=32, init="default"), 9, 9)
    assert default.enc_layers[0].self_attn.in_proj.weight.abs().max() < 0.9 * bound


def recipe_xavier_(model: torch.nn.Module) -> None:
    """The recipe's initialisation as it was written before each family owned its own: Xavier
    on every linear layer (the fused q/k/v projection as three blocks) and GRU weight."""
    fused = {id(m.in_proj) for m in model.modules() if isinstance(m, MultiHeadAttention)}
    for module in model.modules():
        if id(module) in fused:
            for block in module.weight.data.chunk(3, dim=0):  # type: ignore[operator]
                torch.nn.init.xavier_uniform_(block)
        elif type(module) is torch.nn.Linear:
            torch.nn.init.xavier_uniform_(module.weight)
        elif isinstance(module, torch.nn.GRU):
            for name, param in module.named_parameters():
                if name.startswith("weight"):
                    torch.nn.init.xavier_uniform_(param)


@pytest.mark.parametrize("variant", ALL)
def test_each_family_initialises_as_the_recipe(variant: str) -> None:
    """init_weights("xavier") draws exactly the weights the recipe's loop draws."""
    xavier = make(variant, seed=5, init="xavier")
    reference = make(variant, seed=5, init="default")  # the RNG is where xavier's loop began
    assert not torch.equal(reference.out.weight, xavier.out.weight)
    recipe_xavier_(reference)
    for (name, a), b in zip(xavier.state_dict().items(), reference.state_dict().values(),
                            strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_arch_choices_are_the_families() -> None:
    names = ", ".join(families())
    with pytest.raises(ConfigError, match=f"model.arch: expected one of {names}, got 'lstm'"):
        from_dict({"model": {"arch": "lstm"}})
    assert ModelConfig().arch == next(iter(families()))


CONFIG_GRID = [dict(d_model=d, hidden=h, n_heads=n, tie_embeddings=tie)
               for d in (12, 16) for h in (12, 16) for n in (3, 4) for tie in (False, True)]


@pytest.mark.parametrize("arch", list(families()))
def test_config_file_checks_are_the_familys(arch: str) -> None:
    """nmt.config rejects at load time (without torch) exactly the model tables the family's
    check rejects, with the same option named, and so does build_model."""
    outcomes = set()
    for fields in CONFIG_GRID:
        cfg = tiny(arch, **fields)
        try:
            families()[arch].check(cfg)
            family_error = None
        except ConfigError as e:
            family_error = str(e).split(":")[0]
        try:
            from_dict({"model": cfg.to_dict()})
            config_error = None
        except ConfigError as e:
            config_error = str(e).split(": ")[1]
        try:
            build_model(cfg, V_SRC, V_TGT)
            build_error = None
        except ConfigError as e:
            build_error = str(e).split(":")[0]
        assert config_error == family_error == build_error, fields
        outcomes.add(family_error)
    assert len(outcomes) == 2  # the grid holds configs the family takes and one it rejects


def test_a_family_must_implement_the_contract() -> None:
    """A new family's network that forgets its initialisation fails instead of keeping
    PyTorch's defaults."""

    class Half(EncoderDecoder):
        pass

    with pytest.raises(NotImplementedError):
        Half().init_weights("xavier")
    assert Half.max_positions is None and make("gru").max_positions is None
    assert make("transformer").max_positions == ModelConfig().max_positions


def toy_batch(g: torch.Generator, n: int = 32, vocab: int = 12, reverse: bool = False):
    """Random sequences of 2..6 symbols, target = source (or reversed), both + ``<eos>``."""
    lengths = torch.randint(2, 7, (n,), generator=g)
    width = int(lengths.max()) + 1
    src = torch.full((n, width), PAD)
    tgt = torch.full((n, width), PAD)
    for i, n_sym in enumerate(lengths.tolist()):
        seq = torch.randint(4, vocab, (n_sym,), generator=g)
        src[i, :n_sym], src[i, n_sym] = seq, EOS
        tgt[i, :n_sym], tgt[i, n_sym] = (seq.flip(0) if reverse else seq), EOS
    tgt_in = torch.cat([torch.full((n, 1), BOS), tgt[:, :-1]], 1)
    return src, lengths + 1, tgt_in, tgt


def greedy(model: EncoderDecoder, src: torch.Tensor, lengths: torch.Tensor, steps: int):
    """Greedy decoding through the incremental state: ``(B, steps)`` ids."""
    memory = model.encode(src, lengths)
    state = model.init_state(memory)
    token = torch.full((src.shape[0], 1), BOS)
    out = []
    for _ in range(steps):
        step = model.decode(token, memory, state)
        assert step.state is not None
        state, token = step.state, step.logits.argmax(-1)
        out.append(token)
    return torch.cat(out, 1)


@pytest.mark.parametrize("arch", ["gru", "transformer"])
def test_toy_copy_task_learns(arch: str) -> None:
    torch.manual_seed(0)
    if arch == "gru":
        cfg, n = tiny("gru", d_model=16, hidden=16, n_layers=1), 64
    else:
        cfg = tiny(d_model=16, n_layers=1, n_heads=2, d_ff=32, norm_first=True,
                   tie_embeddings=True)
        n = 32
    model = build_model(cfg, 12, 12, joint_vocab=True)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(300):
        src, lengths, tgt_in, tgt = toy_batch(g, n)
        logits = model(src, lengths, tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 2.0 and sum(losses[-20:]) / 20 < 0.1, losses[-20:]
    model.eval()
    src, lengths, _, tgt = toy_batch(g, 64)
    with torch.no_grad():
        hyp = greedy(model, src, lengths, tgt.shape[1])
    real = tgt != PAD
    assert (hyp == tgt)[real].float().mean() > 0.95


@pytest.mark.parametrize("variant", ["gru", "gru-bi"])
def test_gru_decoder_equals_the_recipe_step(variant: str) -> None:
    """The decoder computes the recipe's step: the recipe's call of additive attention (keys
    projected at every step) with the top layer's previous hidden state as query, then nn.GRU
    on concat(context, embedding)."""
    model = make(variant).eval()
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths)
    hidden = memory["enc_hidden"].transpose(0, 1).contiguous()  # (L, B, H)
    outputs = []
    for t in range(tgt.shape[1]):
        query = hidden[-1].unsqueeze(1)
        context, _ = model.attention(query, memory["enc_out"], memory["enc_out"], lengths)
        x = torch.cat((context, model.tgt_embed(tgt[:, t : t + 1])), dim=-1)
        out, hidden = model.decoder(x, hidden)
        outputs.append(out)
    reference = model.out(torch.cat(outputs, 1))
    torch.testing.assert_close(model.decode(tgt, memory).logits, reference)


@pytest.mark.parametrize("variant", ALL)
def test_mixed_precision_forward_backward_and_steps(variant: str) -> None:
    model = make(variant, dropout=0.1).train()
    src, lengths, tgt = batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, lengths, tgt)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()
    logits.float().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all()
               for p in model.parameters() if p.requires_grad)
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        memory = model.encode(src, lengths)
        step = model.decode(tgt[:, :1], memory, model.init_state(memory))
        assert step.state is not None
        step = model.decode(tgt[:, 1:2], memory, step.state)
    assert torch.isfinite(step.logits).all()
