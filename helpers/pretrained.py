"""A real translator's weights in the course's Transformer (notebook 15): Marian, English to French.

Notebook 15's exercise (:func:`load_marian`), the real ``opus-mt`` model or its offline stand-in
(``assets/nb15_marian/``, a small Marian trained on notebook 09's sentences), and :data:`MATCHING`.
``transformers`` and ``sentencepiece`` are imported by the functions that need them.
"""

import json
import os
import socket
import warnings
from pathlib import Path

import torch

from .model import Transformer

OPUS_MT = "Helsinki-NLP/opus-mt-en-fr"
HUB_HOST = "huggingface.co"
# Set to 1, load_opus_mt behaves as offline (as when the notebooks' stored outputs were made).
OFFLINE_VARIABLE = "COURSE_OFFLINE"
# generate() settings under which Hugging Face's search is the course's (notebook 15, section 6):
# the exact stopping rule, no forced </s> at the length limit, no banned token.
MATCHING = {"do_sample": False, "early_stopping": "never", "forced_eos_token_id": None,
            "bad_words_ids": None}


def _transformers():
    """``transformers``, imported on first use, with its progress messages silenced."""
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return transformers


def check_marian(config) -> None:
    """A ``ValueError`` naming what differs from opus-mt's conventions in ``config``."""
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
    """``state_dict[key]`` of ``shape`` (a ``(1, V)`` bias as ``(V,)``), or a ``ValueError``."""
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


def _load(name, **source):
    """``(MarianMTModel in eval mode, MarianTokenizer)`` saved in ``name``: a folder, or the Hub."""
    transformers = _transformers()
    with warnings.catch_warnings():  # "Recommended: pip install sacremoses."
        warnings.simplefilter("ignore")
        tokenizer = transformers.MarianTokenizer.from_pretrained(name, **source)
    model = transformers.MarianMTModel.from_pretrained(name, dtype=torch.float32, **source)
    return model.eval(), tokenizer  # float32, not "auto"


def _reachable(host: str, timeout: float) -> bool:
    """Can a connection to ``host`` be opened within ``timeout`` seconds?"""
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load_opus_mt(name: str = OPUS_MT, timeout: float = 5.0):
    """``(MarianMTModel in eval mode, MarianTokenizer)`` of ``name`` (a local folder, the cache,
    or the Hub if it answers within ``timeout`` seconds), else None after a printed sentence."""
    sources, reason = [], f"no connection to {HUB_HOST}"
    if os.environ.get(OFFLINE_VARIABLE) != "1":
        sources.append({"local_files_only": True})  # the cache first: no network needed
        proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
        if Path(name).is_dir() or proxy or _reachable(HUB_HOST, timeout):  # a proxy: just try
            sources.append({})
    for source in sources:
        try:
            return _load(name, **source)
        except Exception as error:  # not in the cache, or the download failed: no traceback
            if not source.get("local_files_only"):
                reason = f"the download failed: {type(error).__name__}"
    print(f"The real {name} could not be downloaded ({reason}), so every step below runs on "
          "a stand-in: a small MarianMTModel with the real model's conventions, trained on "
          "notebook 09's toy sentences.")
    return None


def train_marian_tokenizer(texts, folder, vocab_size: int = 300):
    """A ``MarianTokenizer`` with one SentencePiece model for both languages, trained on
    ``texts`` in ``folder``; ids: ``</s>`` 0, ``<unk>`` 1, the pieces, ``<pad>`` last."""
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
    """A ``MarianConfig`` of the given sizes with opus-mt's conventions: swish, scaled shared
    embeddings, ``</s>`` = 0 ends a sentence, ``<pad>`` = the last id starts the decoder."""
    pad = vocab_size - 1
    return _transformers().MarianConfig(
        vocab_size=vocab_size, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn, max_position_embeddings=max_positions, activation_function="swish",
        scale_embedding=True, share_encoder_decoder_embeddings=True, pad_token_id=pad,
        decoder_start_token_id=pad, eos_token_id=0, bos_token_id=0, forced_eos_token_id=0)


def standin_marian(vocab_size: int, seed: int = 0, std: float = 0.3, **sizes):
    """A small ``MarianMTModel`` with random weights, in eval mode, with opus-mt's generation
    defaults. Weights and biases ``N(0, std^2)``, LayerNorm gains ``N(1, std^2)``: transformers'
    own initialisation gives nearly one output for every source, hiding a misplaced weight."""
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
    """``model`` with opus-mt's generation defaults: 4 beams, ``max_length``, no ``<pad>``."""
    config = model.config
    model.generation_config.update(num_beams=4, max_length=config.max_position_embeddings,
                                   bad_words_ids=[[config.pad_token_id]])
    return model


STANDIN_PATH = Path(__file__).resolve().parents[1] / "assets" / "nb15_marian"
# notebook 09's corpus, model sizes and training recipe; 500 pieces keep most toy words whole
STANDIN_CORPUS_ARGS = {"seed": 0, "num_train": 20000, "num_valid": 500, "num_test": 1000}
STANDIN_SIZES = {"d_model": 64, "layers": 2, "heads": 4, "ffn": 256, "max_positions": 128}
STANDIN_TRAINING = {"steps": 1200, "batch_size": 128, "warmup": 200, "label_smoothing": 0.1,
                    "clip_norm": 1.0, "seed": 0}
STANDIN_VOCAB_SIZE = 500


def sentence_case(text: str) -> str:
    """``"j'aime la voiture blanche"`` -> ``"J'aime la voiture blanche."``."""
    return text[:1].upper() + text[1:] + "."


def load_standin(path=STANDIN_PATH):
    """``(MarianMTModel in eval mode, MarianTokenizer)``: the offline stand-in saved in ``path``."""
    return _load(path, local_files_only=True)


