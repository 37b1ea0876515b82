"""Transformers from Scratch: the reference implementation behind the notebooks.

Each module holds the finished version of one concept, built step by step in a notebook:

==================  ==========================================  ========
module              what it holds                               notebook
==================  ==========================================  ========
``utils``           seeding and device choice                   all
``checks``          input checks with clear errors              all
``attention``       scaled dot-product attention, the one       01, 03, 10, 12
                    multi-head attention (every attention of
                    the course, the KV cache, rotary option)
``positional``      sinusoidal positional encoding; rotary      02, 12
                    positions (``rope_angles``, ``apply_rope``)
``interop``         conversion to PyTorch's own modules         03, 05, 07, 08
``layers``          LayerNorm and RMSNorm, feed-forward and     04, 05, 07, 12
                    SwiGLU, the residual sub-layer, the
                    encoder and decoder layers and stacks
``masks``           look-ahead and padding masks                06
``model``           ``TransformerConfig``, the Transformer      08, 10
``data``            vocabularies, padded batches                09-14
``training``        label smoothing, warm-up, the training loop 09
``decoding``        greedy decoding, beam search                10
``ablation``        removing attention heads (``zero_head``)    11
``gpt``             the decoder-only model: ``GPTConfig``,      12
                    ``Block``, ``GPT``
``generation``      sampling filters, the generation loop       12
``continuation``    translation by continuation: the data,      12
                    ``train_gpt``, the shipped models, the
                    block variants compared
``distributed``     training with DistributedDataParallel       13
                    (``torchrun``), accumulation, bf16
``fsdp``            FSDP sharding, sharded checkpoints          13
``tokens``          byte-pair encoding, the ``BPE`` tokenizer,  14
                    the snapshot of the course's prose
``pretrained``      a real translator (Marian, opus-mt-en-fr)   15
                    in the course's Transformer, the offline
                    stand-in (imports ``transformers`` lazily)
``translation``     the toy task the model learns: a grammar    09-15
                    (``lexicon``), ``make_corpus``,
                    ``translate`` and its scores, the shipped
                    translators, notebook 14's names
``figures``         drawing only, one module per notebook       all
``exercises``       ``check`` (``use=True``) and ``solution``;  all
                    module per notebook, each slip an edit of
                    the reference; ``pitfalls``: the classic
                    bugs and their hints
``course``          the course's tooling: setup cell, version   all
                    check; ``tools`` (re-execution, assets);
                    ``sync`` (marked cells from ``helpers/``);
                    ``sweep`` (claims across CPUs and seeds)
``bench``           the benchmark (``python -m helpers.bench``) none
==================  ==========================================  ========

Letters used in shape comments everywhere:
``B`` batch, ``L`` sequence length (``Lq`` queries, ``Lk`` keys, ``S`` source, ``T`` target),
``h`` number of heads, ``d_k`` size of one head, ``d_model`` model width, ``V`` vocabulary size.

Nothing heavy runs at import time.
"""

__version__ = "0.1.0"
