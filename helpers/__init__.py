"""Transformers from Scratch: the reference implementation behind the notebooks.

Each module holds the finished version of one concept, built step by step in a notebook:

==================  ===================================================  ==============
module              what it holds                                        notebook
==================  ===================================================  ==============
``utils``           seeding and device choice                            all
``checks``          input checks with clear errors                       all
``attention``       attention, multi-head attention, the KV cache        01, 03, 10, 12
``positional``      sinusoidal positional encoding; rotary positions     02, 12
``interop``         conversion to PyTorch's own modules                  03, 05, 07, 08
``layers``          norms, feed-forward networks, encoder and decoder    04, 05, 07, 12
``masks``           look-ahead and padding masks                         06
``model``           ``TransformerConfig``, the Transformer               08, 10
``data``            vocabularies, padded batches                         09-14
``training``        label smoothing, warm-up, the training loop          09
``decoding``        greedy decoding, beam search                         10
``ablation``        removing attention heads (``zero_head``)             11
``gpt``             the decoder-only model: ``GPTConfig``, ``GPT``       12
``generation``      sampling filters, the generation loop                12
``continuation``    translation by continuation, the block variants      12
``distributed``     training with DistributedDataParallel (torchrun)     13
``fsdp``            FSDP sharding, sharded checkpoints                   13
``tokens``          byte-pair encoding, the ``BPE`` tokenizer            14
``pretrained``      a real translator (Marian) in the course's model     15
``translation``     the toy task: grammar, corpus, ``translate``         09-15
``figures``         drawing only, one module per notebook                all
``exercises``       ``check`` and ``solution``, slips, ``pitfalls``      all
``course``          the setup cell, Colab, the version check             all
==================  ===================================================  ==============

Letters used in shape comments everywhere:
``B`` batch, ``L`` sequence length (``Lq`` queries, ``Lk`` keys, ``S`` source, ``T`` target),
``h`` number of heads, ``d_k`` size of one head, ``d_model`` model width, ``V`` vocabulary size.

Nothing heavy runs at import time. The maintainers' tools (syncing the notebooks' reference
cells, re-executing notebooks, retraining the shipped models, the sweep, the benchmark) are in
``tests/tools``.
"""

__version__ = "0.1.0"
