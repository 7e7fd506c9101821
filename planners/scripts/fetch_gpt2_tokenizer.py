"""Download the GPT-2 BPE vocabulary and merges into $TOKENIZER_DIR unless already there."""

import os
import urllib.request

target = os.environ["TOKENIZER_DIR"]
os.makedirs(target, exist_ok=True)
for variable, name in (("GPT2_VOCAB_URL", "gpt2-vocab.json"), ("GPT2_MERGES_URL", "gpt2-merges.txt")):
    path = os.path.join(target, name)
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        urllib.request.urlretrieve(os.environ[variable], path)
