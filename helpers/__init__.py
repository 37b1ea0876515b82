"""Transformers from Scratch: the reference implementation behind the notebooks.

Each module holds the finished version of one concept, built step by step in a notebook:

==================  ==========================================  ========
module              what it holds                               notebook
==================  ==========================================  ========
``attention``       scaled dot-product and multi-head attention  01, 03
``checks``          input checks with clear errors               all
``positional``      sinusoidal positional encoding               02
``layers``          LayerNorm, feed-forward, encoder/decoder     04, 05, 07
``masks``           look-ahead and padding masks                 06
``model``           ``TransformerConfig``, the Transformer       08
``data``            vocabularies, padded batches                 09
``training``        label smoothing, warm-up, the training loop  09
``decoding``        greedy decoding, beam search, the KV cache   10
``ablation``        removing attention heads (``zero_head``)     11
``interop``         conversion to PyTorch's own modules          05, 07, 08
``gpt``             a decoder-only model, sampling, RMSNorm,     12
                    SwiGLU, rotary positions, the ablation
``distributed``     training with DistributedDataParallel        13
                    (``torchrun``), FSDP, accumulation, bf16
``pretrained``      a real translator (Marian, opus-mt-en-fr)    14
                    in the course's Transformer, an offline
                    stand-in (imports ``transformers`` lazily)
``utils``           seeding and device choice                    all
``translation``     the toy task the model learns: a grammar     09-13
                    (``lexicon``), ``make_corpus``,
                    ``translate`` and its scores, the shipped
                    translators
``figures``         drawing only, one module per notebook        all
``exercises``       ``check`` and ``solution``; one module per   01-14
                    notebook; ``pitfalls``: the classic bugs
``course``          the course's tooling: setup cell, version    all
                    check; ``tools`` (re-execution, assets);
                    ``sync`` (marked cells from ``helpers/``)
==================  ==========================================  ========

Letters used in shape comments everywhere:
``B`` batch, ``L`` sequence length (``Lq`` queries, ``Lk`` keys, ``S`` source, ``T`` target),
``h`` number of heads, ``d_k`` size of one head, ``d_model`` model width, ``V`` vocabulary size.

Nothing heavy runs at import time.
"""

__version__ = "0.1.0"
