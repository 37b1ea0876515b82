"""Notebook 15 offline: a Marian translator (Hugging Face's ``MarianMTModel``) in the course's
``Transformer`` (``helpers/pretrained.py``), checked against Hugging Face itself.

The real ``Helsinki-NLP/opus-mt-en-fr`` is never downloaded here. The tests rely on the
properties of its published config that the stand-in copies (``marian_config``): activation
``swish``, ``scale_embedding=True``, shared embeddings, ``eos_token_id`` 0, the pad id (the last
one) as the decoder's start, and on ``MarianSinusoidalPositionalEmbedding``'s layout (sines,
then cosines), which ``transformers`` builds itself. Everything else is random.
"""

import math

import pytest
import torch

from helpers.decoding import beam_search, greedy_decode
from helpers.masks import padding_mask
from helpers.positional import sinusoidal_encoding
from helpers.pretrained import (
    MATCHING,
    OFFLINE_VARIABLE,
    check_marian,
    load_marian,
    load_opus_mt,
    marian_config,
    marian_key,
    standin_marian,
    train_marian_tokenizer,
)
from helpers.translation import make_corpus

SENTENCES = ["my wolves draw this slow boat", "the red car", "she eats a small cake",
             "you see these old houses", "we like the white dog", "the cat"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A MarianTokenizer whose SentencePiece model is trained here, on text this test writes
    (the course's toy corpus, both languages)."""
    corpus = make_corpus(num_train=1500, num_valid=1, num_test=1)
    texts = [sentence for pair in corpus.train for sentence in pair]
    return train_marian_tokenizer(texts, tmp_path_factory.mktemp("spm"), vocab_size=200)


@pytest.fixture(scope="module")
def batch(tokenizer):
    encoded = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    return encoded.input_ids, encoded.attention_mask


def converted(hf):
    return load_marian(hf.config, hf.state_dict())


# ---------------------------------------------------------------------------------- conventions

def test_the_standin_has_the_published_conventions(tokenizer):
    config = standin_marian(len(tokenizer)).config
    V = len(tokenizer)
    assert (config.activation_function, config.scale_embedding) == ("swish", True)
    assert config.share_encoder_decoder_embeddings and config.tie_word_embeddings
    assert (config.eos_token_id, config.pad_token_id, config.decoder_start_token_id) == (
        0, V - 1, V - 1)
    assert config.bos_token_id == 0  # as published: 0 is </s>, never the decoder's start


def test_marian_positions_are_ours_in_halves():
    hf = standin_marian(20, max_positions=40, d_model=16)
    table = hf.model.encoder.embed_positions.weight
    assert torch.allclose(table, sinusoidal_encoding(40, 16, interleaved=False), atol=1e-6)
    assert not torch.allclose(table, sinusoidal_encoding(40, 16), atol=0.1)
    assert torch.equal(hf.model.decoder.embed_positions.weight, table)


def test_swish_is_silu():
    from transformers.activations import ACT2FN  # here, not at collection: it takes seconds

    x = torch.linspace(-6, 6, 101)
    swish = ACT2FN["swish"]
    assert torch.allclose(swish(x), x * torch.sigmoid(x), atol=1e-7)
    assert torch.allclose(swish(x), torch.nn.functional.silu(x))


def test_check_marian_names_what_differs():
    config = marian_config(10)
    config.activation_function = "gelu"
    config.decoder_layers = 3
    with pytest.raises(ValueError, match="activation_function='gelu' .expected 'swish'.; "
                                         "decoder_layers=3 .expected 2."):
        check_marian(config)


# ---------------------------------------------------------------------------------- logits

@pytest.mark.parametrize("dtype, std, tolerance", [(torch.float32, 0.1, 1e-5),
                                                   (torch.float64, 0.3, 1e-10)])
def test_logits_equal_huggingfaces_on_a_padded_batch(tokenizer, batch, dtype, std, tolerance):
    src, attention = batch
    hf = standin_marian(len(tokenizer), std=std).to(dtype)
    ours = converted(hf).to(dtype)
    pad = hf.config.pad_token_id
    tgt = torch.randint(1, pad, (len(SENTENCES), 9), generator=torch.Generator().manual_seed(1))
    tgt[:, 0] = pad
    tgt[0, 5:] = pad  # a padded target row too
    assert (attention == 0).any()  # the batch is padded
    with torch.no_grad():
        theirs = hf(input_ids=src, attention_mask=attention, decoder_input_ids=tgt).logits
        mine = ours(src, tgt, padding_mask(src, pad))
    assert mine.dtype == dtype and mine.shape == theirs.shape == (len(SENTENCES), 9,
                                                                   len(tokenizer))
    assert (mine - theirs).abs().max().item() <= tolerance
    assert theirs.abs().max().item() > 1.0  # not a trivially small output


def test_each_sentence_alone_gives_its_rows_of_the_batch(tokenizer, batch):
    src, attention = batch
    ours = converted(standin_marian(len(tokenizer)))
    pad = len(tokenizer) - 1
    tgt = torch.full((len(SENTENCES), 3), pad)
    with torch.no_grad():
        together = ours(src, tgt, padding_mask(src, pad))
        for row in range(len(SENTENCES)):
            alone = src[row:row + 1, :int(attention[row].sum())]
            assert torch.allclose(ours(alone, tgt[row:row + 1]), together[row:row + 1],
                                  atol=1e-4)


# ---------------------------------------------------------------------------------- decoding

# (seed, bias): stand-ins whose </s> logit is raised by ``bias``, so that some hypotheses end
# early, at different steps (random weights alone almost never end a sentence)
EOS_PRONE = [(1, 7.0), (2, 6.0), (1, 6.0)]


def eos_prone(vocab_size, seed, bias):
    hf = standin_marian(vocab_size, seed=seed)
    hf.final_logits_bias[0, 0] += bias
    return hf


def ended_lengths(rows):
    return [row.index(0) if 0 in row else None for row in rows]


@pytest.mark.parametrize("seed, bias", EOS_PRONE[:2])
def test_greedy_equals_generate_with_one_beam(tokenizer, batch, seed, bias):
    src, attention = batch
    hf = eos_prone(len(tokenizer), seed, bias)
    ours, pad = converted(hf), hf.config.pad_token_id
    mine = greedy_decode(ours, src, 20, bos_id=pad, eos_id=0, src_mask=padding_mask(src, pad))
    theirs = hf.generate(input_ids=src, attention_mask=attention, num_beams=1,
                         max_new_tokens=20, **MATCHING)
    # generate pads a finished row with the pad id, greedy_decode repeats </s>: the same tokens
    # up to each row's end
    for a, b in zip(mine.tolist(), theirs.tolist(), strict=True):
        end = b.index(0) + 1 if 0 in b else len(b)
        assert a[:end] == b[:end]
        assert set(a[end:]) <= {0} and set(b[end:]) <= {pad}
    assert len(set(ended_lengths(theirs.tolist()))) > 1  # rows end at different steps, or never


def test_greedy_with_and_without_the_kv_cache(tokenizer, batch):
    src, _ = batch
    ours, pad = converted(standin_marian(len(tokenizer))), len(tokenizer) - 1
    mask = padding_mask(src, pad)
    assert torch.equal(greedy_decode(ours, src, 12, pad, 0, mask),
                       greedy_decode(ours, src, 12, pad, 0, mask, use_cache=False))


def beams(hf, ours, src, max_len, **settings):
    """The best hypothesis of beam_search and of generate, for each sentence of ``src``
    (its padding removed), without the start token."""
    pad = hf.config.pad_token_id
    mine, theirs = [], []
    for row in src:
        one = row[row != pad][None]
        mine.append(beam_search(ours, one, 4, max_len, pad, 0, length_penalty=1.0)[0][0])
        out = hf.generate(input_ids=one, max_new_tokens=max_len, **settings)[0].tolist()[1:]
        theirs.append(out[:out.index(0) + 1] if 0 in out else out)
    return mine, theirs


@pytest.mark.parametrize("seed, bias", EOS_PRONE)
def test_beam_search_equals_generate_with_the_notebooks_settings(tokenizer, batch, seed, bias):
    src, _ = batch
    hf = eos_prone(len(tokenizer), seed, bias)
    mine, theirs = beams(hf, converted(hf), src, 15, num_beams=4, length_penalty=1.0, **MATCHING)
    assert mine == theirs
    assert len({len(hypothesis) for hypothesis in mine}) > 1  # they end at different steps


def test_the_published_generation_defaults_differ_where_the_notebook_says(tokenizer, batch):
    """generate()'s defaults (the published generation config: forced </s> at the limit, <pad>
    banned, early_stopping=False) against the course's conventions, one setting at a time."""
    src, _ = batch
    hf = standin_marian(len(tokenizer))  # random weights: no hypothesis ends before the limit
    ours = converted(hf)
    assert hf.generation_config.num_beams == 4
    assert hf.generation_config.bad_words_ids == [[hf.config.pad_token_id]]
    mine, defaults = beams(hf, ours, src, 10)  # generate's defaults, but max_new_tokens
    forced = [[*hypothesis[:-1], 0] for hypothesis in mine]
    assert defaults == forced != mine  # the only difference: </s> forced as the last token
    _, no_forced = beams(hf, ours, src, 10, forced_eos_token_id=None)
    assert no_forced == mine


# ---------------------------------------------------------------------------------- tokenizer

def test_the_tokenizer_round_trips_sentences(tokenizer):
    sentences = SENTENCES + ["the translators were unbelievably fast"]  # unseen words
    for sentence in sentences:
        ids = tokenizer(sentence).input_ids
        assert ids[-1] == 0 and 0 not in ids[:-1]  # </s> closes the source
        assert tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids, skip_special_tokens=True) == sentence
    pieces = tokenizer.convert_ids_to_tokens(tokenizer("unbelievably").input_ids)
    assert len(pieces) > 2 and pieces[0].startswith("▁")  # cut into pieces, a word start first


def test_the_vocabulary_has_marians_layout(tokenizer):
    vocab = tokenizer.get_vocab()
    V = len(tokenizer)
    assert (vocab["</s>"], vocab["<unk>"], vocab["<pad>"]) == (0, 1, V - 1)
    assert (tokenizer.eos_token_id, tokenizer.pad_token_id) == (0, V - 1)
    assert sorted(vocab.values()) == list(range(V))
    padded = tokenizer(["the cat", "my wolves draw this slow boat"], padding=True).input_ids
    assert padded[0][-1] == V - 1


# ---------------------------------------------------------------------------------- loading

def connections(monkeypatch) -> list:
    """Every ``socket.create_connection`` that ``load_opus_mt`` opens, as ``(address, timeout)``
    (then the real call): what makes it wait or not, counted instead of timed."""
    import socket

    opened, real = [], socket.create_connection

    def recording(address, timeout=None, *args, **kwargs):
        opened.append((address, timeout))
        return real(address, timeout, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording)
    return opened


def test_offline_loading_says_so_in_one_sentence_without_waiting(monkeypatch, capsys):
    monkeypatch.setenv(OFFLINE_VARIABLE, "1")
    opened = connections(monkeypatch)
    assert load_opus_mt() is None
    assert opened == []  # offline: not even one attempt to reach the Hub
    out = capsys.readouterr()
    assert out.out.startswith("The real Helsinki-NLP/opus-mt-en-fr could not be downloaded "
                              "(no connection to huggingface.co), so every step below runs on "
                              "a stand-in")
    assert out.out.count("\n") == 1 and "Traceback" not in out.out + out.err


def test_an_unreachable_hub_fails_fast(monkeypatch, capsys):
    monkeypatch.delenv(OFFLINE_VARIABLE, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never reach the network from the tests
    for proxy in ("HTTPS_PROXY", "https_proxy"):  # with a proxy, load_opus_mt just tries
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setattr("helpers.pretrained.HUB_HOST", "hub.invalid")  # an unresolvable name
    opened = connections(monkeypatch)
    assert load_opus_mt("course-tests/not-a-model", timeout=2.0) is None
    # one attempt to reach the Hub, limited to the timeout given; whatever transformers tries
    # itself (huggingface_hub, imported earlier in this process, may) has a limit too
    assert [timeout for address, timeout in opened if address[0] == "hub.invalid"] == [2.0]
    assert all(timeout is not None and timeout <= 10 for _, timeout in opened), opened
    assert "(no connection to hub.invalid)" in capsys.readouterr().out


def test_a_saved_model_loads_through_from_pretrained(tokenizer, tmp_path, monkeypatch, batch):
    """The online path, offline: from_pretrained on a folder holding a saved stand-in."""
    monkeypatch.delenv(OFFLINE_VARIABLE, raising=False)
    hf = standin_marian(len(tokenizer))
    hf.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = load_opus_mt(str(tmp_path))
    assert loaded is not None
    model, loaded_tokenizer = loaded
    assert not model.training
    src, attention = batch
    assert torch.equal(loaded_tokenizer(SENTENCES, padding=True, return_tensors="pt").input_ids,
                       src)
    tgt = torch.full((len(SENTENCES), 2), hf.config.pad_token_id)
    with torch.no_grad():
        mine = converted(model)(src, tgt, padding_mask(src, hf.config.pad_token_id))
        theirs = hf(input_ids=src, attention_mask=attention, decoder_input_ids=tgt).logits
    assert torch.allclose(mine, theirs, atol=1e-4)
    assert torch.equal(model.final_logits_bias, hf.final_logits_bias)  # the bias is saved


def test_the_real_models_size_from_its_published_config():
    """Built offline with random weights from the sizes the published config gives."""
    config = marian_config(59514, d_model=512, layers=6, heads=8, ffn=2048, max_positions=512)
    from transformers import MarianMTModel

    with torch.device("meta"):
        hf = MarianMTModel(config)
    trained = sum(p.numel() for name, p in hf.named_parameters()
                  if "embed_positions" not in name)
    assert trained == 74_609_664  # about 75M (the frozen positional tables: 0.5M more)
    assert math.isclose(trained / 1e6, 74.6, abs_tol=0.05)


# ---------------------------------------------------------------------------------- bad input

def random_marian(tied: bool, seed: int = 0, vocab: int = 30):
    """A small random ``MarianMTModel`` (the stand-in's way of drawing weights), its output
    layer tied to the embeddings or not."""
    import transformers

    config = marian_config(vocab, d_model=16, heads=2, layers=1, ffn=32, max_positions=16)
    config.tie_word_embeddings = tied
    torch.manual_seed(seed)
    hf = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        for name, parameter in hf.named_parameters():
            if "embed_positions" not in name:
                parameter.normal_(1.0 if name.endswith("layer_norm.weight") else 0.0, 0.3)
        hf.final_logits_bias.normal_(0.0, 1.0)
    return hf


@pytest.mark.parametrize("tied", [True, False])
def test_an_untied_output_layer_is_loaded_from_its_own_weights(tied):
    """With ``tie_word_embeddings=False`` Hugging Face reads ``lm_head.weight`` and each side's
    ``embed_tokens``; loading ``model.shared.weight`` instead gave other logits, silently."""
    hf = random_marian(tied)
    src = torch.tensor([[5, 6, 7, 8, 0], [9, 4, 0, 29, 29]])
    tgt = torch.tensor([[29, 4, 5, 6], [29, 7, 8, 9]])
    ours = converted(hf)
    assert (ours.generator.weight is ours.tgt_embed.weight) == tied
    with torch.no_grad():
        expected = hf(input_ids=src, attention_mask=src != 29, decoder_input_ids=tgt).logits
        got = ours(src, tgt, padding_mask(src, 29))
    assert (got - expected).abs().max() < 1e-5 * expected.abs().max()
    assert marian_key("generator.weight", tied) == (
        "model.shared.weight" if tied else "lm_head.weight")


def test_a_state_dict_of_another_size_names_the_entry_and_both_shapes():
    hf = random_marian(True, vocab=30)
    bigger = marian_config(33, d_model=16, heads=2, layers=1, ffn=32, max_positions=16)
    with pytest.raises(ValueError, match=r"model.shared.weight has shape \(30, 16\), but the "
                                         r"config .* asks for \(33, 16\)"):
        load_marian(bigger, hf.state_dict())


def test_a_transposed_matrix_is_refused_not_reshaped():
    hf = random_marian(True)
    state = dict(hf.state_dict())
    key = "model.encoder.layers.0.fc1.weight"  # (d_ff, d_model) = (32, 16)
    state[key] = state[key].T.contiguous()
    with pytest.raises(ValueError, match=rf"{key} has shape \(16, 32\).*\(32, 16\)"):
        load_marian(hf.config, state)


def test_a_marianmodel_state_dict_is_named_as_such():
    import transformers

    hf = random_marian(True)
    base = transformers.MarianModel(hf.config).state_dict()  # no "model." prefix, no LM head
    with pytest.raises(ValueError, match="a MarianModel's, which has no output layer"):
        load_marian(hf.config, base)
    state = dict(hf.state_dict())
    del state["final_logits_bias"]
    with pytest.raises(ValueError, match="the state dict has no 'final_logits_bias'"):
        load_marian(hf.config, state)
