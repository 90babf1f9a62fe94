"""Chat / canvas format of the embedded tiny DLM (the C++ engine implements exactly this).

Prompt text (one turn), tokenized with the BPE tokenizer (control tokens are
matched as whole strings inside the text):

    <|bos|><|system|>\\n{prefix}<|eot|><|user|>\\n{prompt}<|eot|><|assistant|>\\n

The shared, cacheable prefix is the token span `<|bos|><|system|>\\n{prefix}<|eot|>`
(everything up to and including the first <|eot|>); its token ids are exactly
encode("<|bos|><|system|>\\n" + prefix + "<|eot|>") because control tokens split
pre-tokenization, so tokenizing prefix and rest separately gives the same ids.

Answer canvas (gen_length tokens, default GEN_LENGTH = 32), appended after the
prompt: at inference all <|mask|>; the training target is

    encode(" " + answer) + [<|eot|>] + [<|eos|>] * (gen_length - len - 1)

i.e. the answer text is tokenized WITH ONE LEADING SPACE (so that the value
words / letters / numbers are the same tokens as inside the prefix), then
end-of-turn, then EOS padding (LLaDA SFT style).  To read a generated answer:
cut the canvas at the first <|eot|> or <|eos|>, decode, strip whitespace.
Scoring: docqa / rule exact match after strip; arith compares the integer after
the last "####"; a worked rule answer ("rule T. #### OUTPUT") compares the text
after the last "####".

Training sequences may pack several turns after one prefix:
    <|bos|><|system|>\\n{prefix}<|eot|>
    (<|user|>\\n{q_i}<|eot|><|assistant|>\\n{" " + a_i}<|eot|>)*   (earlier turns)
    <|user|>\\n{q_n}<|eot|><|assistant|>\\n{canvas of gen_length}   (last turn)
with every answer token (and each turn's <|eot|>) a diffusion target.
"""

GEN_LENGTH = 32

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}<|system|>\n{{ message['content'] }}<|eot|>"
    "{% elif message['role'] == 'user' %}<|user|>\n{{ message['content'] }}<|eot|>"
    "{% elif message['role'] == 'assistant' %}<|assistant|>\n {{ message['content'] }}<|eot|>"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def prefix_text(prefix):
    return "<|bos|><|system|>\n" + prefix + "<|eot|>"


def turn_text(prompt):
    return "<|user|>\n" + prompt + "<|eot|><|assistant|>\n"


def prompt_text(prefix, prompt):
    return prefix_text(prefix) + turn_text(prompt)


def answer_text(answer):
    return " " + answer


def target_canvas(tok, answer, gen_length=GEN_LENGTH):
    ids = tok.encode(answer_text(answer), allow_special=False) + [tok.special["<|eot|>"]]
    if len(ids) > gen_length:
        ids = ids[:gen_length]
    return ids + [tok.special["<|eos|>"]] * (gen_length - len(ids))


def extract_answer(tok, canvas_ids):
    stop = {tok.special["<|eot|>"], tok.special["<|eos|>"]}
    out = []
    for i in canvas_ids:
        if i in stop:
            break
        out.append(i)
    return tok.decode(out, skip_special=True).strip()


def after_marker(s):
    """The stripped text after the last "####", or None when there is none."""
    return s.rsplit("####", 1)[1].strip() if "####" in s else None


def score(family, pred, answer):
    if family == "arith":
        def num(s):
            t = (after_marker(s) or "").split()
            return t[0] if t else None
        return num(pred) is not None and num(pred) == num(answer)
    # A worked answer (rule's "rule T. #### OUTPUT"): the text after the marker is scored.
    if after_marker(answer) is not None:
        return after_marker(pred) == after_marker(answer)
    return pred.strip() == answer.strip()
