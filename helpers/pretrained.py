"""A real translator's weights in the course's Transformer (notebook 15): Marian, English to French.

The Helsinki-NLP ``opus-mt`` translators (``MarianMTModel`` in Hugging Face ``transformers``) are
the paper's base model with four conventions of their own, each an option of the course's model:
the feed-forward activation (swish, ``activation="silu"``), the positional table in halves
(``interleaved_positions=False``), a bias on the output logits (the course's ``generator`` has
one), and the decoder started with the pad id (``bos_id`` of ``greedy_decode``).

Here: notebook 15's exercise (:func:`load_marian`, :func:`marian_key`), the real model or the
offline stand-in (``assets/nb15_marian/``, a small Marian trained on notebook 09's sentences),
and :data:`MATCHING`, the ``generate`` settings under which Hugging Face's search is the course's.

Nothing in the core imports this module; ``transformers`` and ``sentencepiece`` are imported by
the functions that need them.
"""

import json
import os
import random
import socket
import tempfile
import time
import warnings
from pathlib import Path

import torch

from .model import Transformer

OPUS_MT = "Helsinki-NLP/opus-mt-en-fr"
HUB_HOST = "huggingface.co"
# Set to 1, load_opus_mt behaves as on a machine without internet (tests/ and the notebooks'
# re-execution set it, so that the stored outputs, made offline, are reproduced anywhere).
OFFLINE_VARIABLE = "COURSE_OFFLINE"
# generate() settings under which Hugging Face's search is the course's (notebook 15, section 6):
# the exact stopping rule ("never" stops while a running beam can still win), no forced </s>
# at the length limit, no banned token; length_penalty as given to beam_search.
MATCHING = {"do_sample": False, "early_stopping": "never", "forced_eos_token_id": None,
            "bad_words_ids": None}


def _transformers():
    """``transformers``, imported on first use, with its progress messages silenced."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return transformers


# ----------------------------------------------------------------------------------------------
# The exercise: Marian's weights in the course's Transformer
# ----------------------------------------------------------------------------------------------

def check_marian(config) -> None:
    """A ``ValueError`` naming what differs when ``config`` is not a Marian translator that the
    course's ``Transformer`` can hold (opus-mt's conventions: swish, scaled embeddings, shared by
    encoder and decoder, as many layers and heads on both sides)."""
    wanted = {"activation_function": "swish", "scale_embedding": True,
              "share_encoder_decoder_embeddings": True,
              "decoder_layers": config.encoder_layers, "decoder_ffn_dim": config.encoder_ffn_dim,
              "decoder_attention_heads": config.encoder_attention_heads}
    differ = [f"{key}={getattr(config, key)!r} (expected {value!r})"
              for key, value in wanted.items() if getattr(config, key) != value]
    if differ:
        raise ValueError("load_marian expects an opus-mt translator's conventions: "
                         + "; ".join(differ))


def marian_weight(state_dict: dict, key: str, shape) -> torch.Tensor:
    """``state_dict[key]``, which must have ``shape`` (``final_logits_bias``: ``(1, V)`` for a
    ``(V,)`` bias); a ``ValueError`` saying what is missing or what differs, never a reshape of
    a matrix of the wrong layout."""
    if key not in state_dict:
        if "shared.weight" in state_dict:  # a MarianModel: the encoder-decoder without the head
            raise ValueError("load_marian expects a MarianMTModel's state dict (keys 'model.*', "
                             "'final_logits_bias'); this one has 'shared.weight' without "
                             "'model.', a MarianModel's, which has no output layer")
        raise ValueError(f"load_marian: the state dict has no {key!r} (expected a "
                         f"MarianMTModel's state_dict())")
    weight = state_dict[key]
    if key == "final_logits_bias" and weight.dim() == 2 and weight.shape[0] == 1:
        weight = weight[0]  # (1, V) -> (V,)
    if tuple(weight.shape) != tuple(shape):
        raise ValueError(f"load_marian: {key} has shape {tuple(weight.shape)}, but the config "
                         f"(vocab_size, d_model, ffn dims) asks for {tuple(shape)}; are the config "
                         f"and the state dict of the same model?")
    return weight


def marian_key(name: str, tied: bool = True) -> str:
    """The key of Marian's state dict that holds the course's parameter ``name``, for example
    ``decoder.layers.0.cross_attn.w_q.weight`` ->
    ``model.decoder.layers.0.encoder_attn.q_proj.weight``. ``tied``: one matrix is both
    embeddings and the output projection (``config.tie_word_embeddings``, as in every opus-mt
    model); else each is stored on its own."""
    if name == "generator.bias":
        return "final_logits_bias"  # (1, V), added to the logits
    if name.split(".")[0] in ("src_embed", "tgt_embed", "generator"):
        if not tied:  # three matrices of their own
            return {"src_embed.weight": "model.encoder.embed_tokens.weight",
                    "tgt_embed.weight": "model.decoder.embed_tokens.weight",
                    "generator.weight": "lm_head.weight"}[name]
        return "model.shared.weight"  # one matrix: both embeddings and the output projection
    decoder = name.startswith("decoder.")
    renames = {"w_q": "q_proj", "w_k": "k_proj", "w_v": "v_proj", "w_o": "out_proj",
               "cross_attn": "encoder_attn", "linear1": "fc1", "linear2": "fc2",
               "norm1": "self_attn_layer_norm",  # a LayerNorm is named after its sub-layer
               "norm2": "encoder_attn_layer_norm" if decoder else "final_layer_norm",
               "norm3": "final_layer_norm"}
    path = name.replace("feed_forward.", "")  # Marian's fc1 and fc2 sit in the layer itself
    return "model." + ".".join(renames.get(piece, piece) for piece in path.split("."))


def load_marian(config, state_dict: dict) -> Transformer:
    """The course's ``Transformer`` with the sizes, conventions and weights of a ``MarianMTModel``
    (``config``: its ``MarianConfig``; ``state_dict``: its ``state_dict()``), in eval mode."""
    check_marian(config)  # the conventions assumed below, or a clear error
    tied = config.tie_word_embeddings  # True for opus-mt: the output projection is the embedding
    model = Transformer(
        config.vocab_size, config.vocab_size, d_model=config.d_model,
        num_heads=config.encoder_attention_heads, num_layers=config.encoder_layers,
        d_ff=config.encoder_ffn_dim, dropout=0.0, max_len=config.max_position_embeddings,
        tie_weights=tied, activation="silu", interleaved_positions=False)  # swish; sines, cosines
    weights = {name: marian_weight(state_dict, marian_key(name, tied), ours.shape)
               for name, ours in model.state_dict().items()}
    model.load_state_dict(weights)  # strict: every parameter is given, each of the right shape
    return model.eval()


# ----------------------------------------------------------------------------------------------
# The real model, or the offline stand-in
# ----------------------------------------------------------------------------------------------

def _reachable(host: str, timeout: float) -> bool:
    """Can a connection to ``host`` be opened within ``timeout`` seconds? (Never hangs.)"""
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_opus_mt(name: str = OPUS_MT, timeout: float = 5.0):
    """``(MarianMTModel in eval mode, MarianTokenizer)`` of ``name``: from the local cache if it
    is there, else from the Hub (about 300 MB) if ``huggingface.co`` answers within ``timeout``
    seconds (or through a proxy named by ``HTTPS_PROXY``). Else None, after one printed sentence
    saying so. ``name`` may be a local folder."""
    transformers = _transformers()
    sources, reason = [], f"no connection to {HUB_HOST}"
    if os.environ.get(OFFLINE_VARIABLE) != "1":
        sources.append({"local_files_only": True})  # the cache first: no network needed
        proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
        if Path(name).is_dir() or proxy or _reachable(HUB_HOST, timeout):  # a proxy: just try
            sources.append({})
    for source in sources:
        try:
            with warnings.catch_warnings():  # "Recommended: pip install sacremoses."
                warnings.simplefilter("ignore")
                tokenizer = transformers.MarianTokenizer.from_pretrained(name, **source)
            model = transformers.MarianMTModel.from_pretrained(name, dtype=torch.float32,
                                                               **source)  # not "auto"
            return model.eval(), tokenizer
        except Exception as error:  # not in the cache, or the download failed: no traceback
            if not source.get("local_files_only"):
                reason = f"the download failed: {type(error).__name__}"
    print(f"The real {name} could not be downloaded ({reason}), so every step below runs on "
          "a stand-in: a small MarianMTModel with the real model's conventions, trained on "
          "notebook 09's toy sentences.")
    return None


def train_marian_tokenizer(texts, folder, vocab_size: int = 300):
    """A ``MarianTokenizer`` whose SentencePiece model (one, shared by both languages, as
    opus-mt's) is trained on ``texts`` (a list of sentences), written to ``folder``. Its ids
    follow Marian's layout: ``</s>`` 0, ``<unk>`` 1, the pieces, ``<pad>`` last."""
    import sentencepiece

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "text.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    sentencepiece.SentencePieceTrainer.train(
        input=str(folder / "text.txt"), model_prefix=str(folder / "spm"), vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, unk_id=0, bos_id=-1, eos_id=-1,
        num_threads=1, minloglevel=2)  # one thread: the same pieces on every machine
    processor = sentencepiece.SentencePieceProcessor(model_file=str(folder / "spm.model"))
    pieces = [processor.id_to_piece(i) for i in range(1, processor.get_piece_size())]
    vocab = {piece: i for i, piece in enumerate(["</s>", "<unk>", *pieces, "<pad>"])}
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    for side in ("source", "target"):
        (folder / f"{side}.spm").write_bytes((folder / "spm.model").read_bytes())
    with warnings.catch_warnings():  # "Recommended: pip install sacremoses."
        warnings.simplefilter("ignore")
        return _transformers().MarianTokenizer(str(folder / "source.spm"),
                                               str(folder / "target.spm"),
                                               str(folder / "vocab.json"))


def marian_config(vocab_size: int, d_model: int = 64, layers: int = 2, heads: int = 4,
                  ffn: int = 256, max_positions: int = 128):
    """A ``MarianConfig`` of the given sizes with the published opus-mt conventions: swish,
    embeddings scaled by sqrt(d_model) and shared, ``</s>`` = 0 ends the source and stops the
    decoder, ``<pad>`` = the last id starts it."""
    pad = vocab_size - 1
    return _transformers().MarianConfig(
        vocab_size=vocab_size, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn, max_position_embeddings=max_positions, activation_function="swish",
        scale_embedding=True, share_encoder_decoder_embeddings=True, pad_token_id=pad,
        decoder_start_token_id=pad, eos_token_id=0, bos_token_id=0, forced_eos_token_id=0)


def standin_marian(vocab_size: int, seed: int = 0, std: float = 0.3, **sizes):
    """A small ``MarianMTModel`` (sizes: see :func:`marian_config`) with random weights, in eval
    mode, and the published model's generation defaults (:func:`published_generation`).

    Every weight and bias is drawn from ``N(0, std^2)``, every LayerNorm gain from ``N(1,
    std^2)``, and ``final_logits_bias`` from ``N(0, 1)``: ``transformers``' own initialisation
    (0.02, gains 1, biases 0) gives nearly the same output for every source, and would hide a
    LayerNorm or a bias loaded in the wrong place. The positional table is left as it is."""
    transformers = _transformers()
    config = marian_config(vocab_size, **sizes)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        model = transformers.MarianMTModel(config)
        for name, parameter in model.named_parameters():
            if "embed_positions" not in name:
                parameter.normal_(1.0 if name.endswith("layer_norm.weight") else 0.0, std)
        model.final_logits_bias.normal_(0.0, 1.0)
    return published_generation(model).eval()


def published_generation(model):
    """``model`` with opus-mt's generation defaults: 4 beams, at most as many tokens as
    positions (512 there), ``<pad>`` never generated."""
    config = model.config
    model.generation_config.update(num_beams=4, max_length=config.max_position_embeddings,
                                   bad_words_ids=[[config.pad_token_id]])
    return model


# ----------------------------------------------------------------------------------------------
# The offline stand-in: a small Marian translator trained on the course's corpus
# ----------------------------------------------------------------------------------------------

STANDIN_PATH = Path(__file__).resolve().parents[1] / "assets" / "nb15_marian"
# notebook 09's corpus and small model (2 + 2 layers of width 64), a SentencePiece vocabulary
# of 500 pieces (most toy words whole), the course's training recipe
STANDIN_CORPUS_ARGS = {"seed": 0, "num_train": 20000, "num_valid": 500, "num_test": 1000}
STANDIN_SIZES = {"d_model": 64, "layers": 2, "heads": 4, "ffn": 256, "max_positions": 128}
STANDIN_TRAINING = {"steps": 1200, "batch_size": 128, "warmup": 200, "label_smoothing": 0.1,
                    "clip_norm": 1.0, "seed": 0}
STANDIN_VOCAB_SIZE = 500


def sentence_case(text: str) -> str:
    """A toy sentence as a person writes it: ``"j'aime la voiture blanche"`` ->
    ``"J'aime la voiture blanche."``."""
    return text[:1].upper() + text[1:] + "."


def load_standin(path=STANDIN_PATH):
    """``(MarianMTModel in eval mode, MarianTokenizer)``: the offline stand-in saved in
    ``path`` (``save_pretrained``'s folder), loaded as the real model is, without a network."""
    transformers = _transformers()
    with warnings.catch_warnings():  # "Recommended: pip install sacremoses."
        warnings.simplefilter("ignore")
        tokenizer = transformers.MarianTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.MarianMTModel.from_pretrained(path, dtype=torch.float32,
                                                       local_files_only=True)
    return model.eval(), tokenizer


def _encoded_pairs(pairs, tokenizer) -> list:
    """Each ``(english, french)`` pair as two lists of ids, each ending with ``</s>``."""
    sources = tokenizer([en for en, _ in pairs]).input_ids
    targets = tokenizer(text_target=[fr for _, fr in pairs]).input_ids
    return list(zip(sources, targets, strict=True))


def _marian_batches(encoded, batch_size: int, pad_id: int, seed: int):
    """Endless batches ``(input_ids, attention_mask, labels)``, shuffled anew every epoch,
    padded with ``pad_id``."""
    rng, order = random.Random(seed), list(range(len(encoded)))
    while True:
        rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            chosen = [encoded[i] for i in order[start:start + batch_size]]
            padded = [torch.nn.utils.rnn.pad_sequence([torch.tensor(ids[k]) for ids in chosen],
                                                      batch_first=True, padding_value=pad_id)
                      for k in (0, 1)]
            yield padded[0], padded[0] != pad_id, padded[1]


def train_standin(pairs, tokenizer, steps: int, batch_size: int = 128, warmup: int = 200,
                  label_smoothing: float = 0.1, clip_norm: float = 1.0, seed: int = 0,
                  progress: bool = True):
    """A small ``MarianMTModel`` (:data:`STANDIN_SIZES`, ``tokenizer``'s vocabulary, the
    published conventions and generation defaults) trained on ``pairs`` as notebook 09 trains
    its model: Adam with the warm-up schedule, label smoothing, clipping. The decoder reads the
    labels behind the pad id (notebook 15's exercise 2). Returns ``(model in eval mode,
    losses)``.

    ``transformers`` keeps ``final_logits_bias`` as a constant buffer; Marian trains it, so it is
    a parameter here while training."""
    from .training import label_smoothed_nll, make_optimizer, train

    transformers = _transformers()
    config = marian_config(len(tokenizer), **STANDIN_SIZES)
    pad = config.pad_token_id
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.MarianMTModel(config)
    bias = model.final_logits_bias
    del model._buffers["final_logits_bias"]
    model.final_logits_bias = torch.nn.Parameter(bias)  # trained, as in Marian

    def loss_fn(model, batch):
        input_ids, attention_mask, labels = batch
        start = torch.full_like(labels[:, :1], pad)  # the decoder starts from the pad id
        decoder_inputs = torch.cat([start, labels[:, :-1]], dim=1)  # the labels shifted right
        logits = model(input_ids=input_ids, attention_mask=attention_mask,
                       decoder_input_ids=decoder_inputs).logits
        return label_smoothed_nll(logits, labels, label_smoothing, ignore_index=pad)

    optimizer, scheduler = make_optimizer(model, config.d_model, warmup)
    batches = _marian_batches(_encoded_pairs(pairs, tokenizer), batch_size, pad, seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout's masks
        losses = train(model, batches, loss_fn, optimizer, scheduler, max_steps=steps,
                       clip_norm=clip_norm, progress=progress)
    trained = model.final_logits_bias.detach()
    del model._parameters["final_logits_bias"]
    model.register_buffer("final_logits_bias", trained)  # back to transformers' layout
    return published_generation(model).eval(), losses


def standin_exact_match(model, tokenizer, pairs, batch_size: int = 100) -> float:
    """The share of ``pairs`` whose greedy translation (``generate`` with :data:`MATCHING`)
    is exactly the French sentence."""
    right = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        batch = tokenizer([en for en, _ in chunk], padding=True, return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**batch, num_beams=1, max_new_tokens=32, **MATCHING)
        said = tokenizer.batch_decode(out, skip_special_tokens=True)
        right += sum(a == fr for a, (_, fr) in zip(said, chunk, strict=True))
    return right / len(pairs)


def retrain_standin(path=None, progress: bool = True) -> dict:
    """Retrain notebook 15's offline stand-in from scratch and save it (``save_pretrained``:
    config, weights, generation defaults, the tokenizer's files, and ``training.json``, the
    metadata returned) to ``path`` (default :data:`STANDIN_PATH`): a SentencePiece vocabulary
    and a ``MarianMTModel`` trained on :data:`STANDIN_CORPUS_ARGS`'s corpus, each sentence
    written as a person writes it (:func:`sentence_case`)."""
    from .translation import make_corpus

    corpus = make_corpus(**STANDIN_CORPUS_ARGS)
    train, valid, test = ([(sentence_case(en), sentence_case(fr)) for en, fr in split]
                          for split in (corpus.train, corpus.valid, corpus.test))
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = train_marian_tokenizer([s for pair in train for s in pair], folder,
                                           vocab_size=STANDIN_VOCAB_SIZE)
    begin = time.perf_counter()
    model, losses = train_standin(train, tokenizer, progress=progress, **STANDIN_TRAINING)
    seconds = time.perf_counter() - begin
    metadata = {"corpus": dict(STANDIN_CORPUS_ARGS), "sentence_case": True,
                "vocab_size": len(tokenizer), "sizes": dict(STANDIN_SIZES),
                "training": dict(STANDIN_TRAINING), "train_seconds": round(seconds, 1),
                "torch_threads": torch.get_num_threads(), "final_loss": round(losses[-1], 4),
                "valid_exact_match": standin_exact_match(model, tokenizer, valid),
                "test_exact_match": standin_exact_match(model, tokenizer, test)}
    path = Path(path or STANDIN_PATH)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    (path / "training.json").write_text(json.dumps(metadata, indent=1) + "\n", encoding="utf-8")
    return metadata
