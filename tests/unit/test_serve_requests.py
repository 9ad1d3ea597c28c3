"""Every parameter of a chat-completion request is checked, and a refusal names the parameter.

The body goes through the service's own path (:func:`decode_json`, then :func:`parse_chat`) as
raw bytes, so what JSON allows and Python reads oddly (NaN, Infinity, an integer of 100,000
digits) is tried as a client would send it; each refused request has an honest twin that is
accepted, so a check that refuses everything shows.
"""

from __future__ import annotations

import json

import pytest

from nemo_genrm.config import validate
from nemo_genrm.serve.config import ServiceConfig
from nemo_genrm.serve.guard import RequestError, decode_json
from nemo_genrm.serve.requests import UNSUPPORTED, parse_chat

CFG = validate(
    ServiceConfig,
    {
        "judge": {"model_name": "m", "sampling": {"temperature": 0.0, "top_p": 1.0, "seed": 0, "max_new_tokens": 8}},
        "serve": {"served_model_name": "judge"},
    },
)
MESSAGES = '"messages": [{"role": "user", "content": "Is 2 + 2 = 4?"}]'


def _parse(fields: str):
    raw = ("{" + ", ".join(f for f in (MESSAGES, fields) if f) + "}").encode()
    return parse_chat(decode_json(raw, 32), CFG)


def _refused(fields: str) -> RequestError:
    with pytest.raises(RequestError) as err:
        _parse(fields)
    return err.value


# (fields sent, the parameter the 400 must name, an honest twin that is accepted)
REFUSED = [
    ('"temperature": NaN', "temperature", '"temperature": 0.0'),
    ('"temperature": Infinity', "temperature", '"temperature": 0'),
    ('"temperature": -0.5', "temperature", ""),
    ('"temperature": "0"', "temperature", '"temperature": 0.0'),
    ('"top_p": NaN', "top_p", '"top_p": 1.0'),
    ('"top_p": 1e999', "top_p", '"top_p": 1'),
    ('"seed": ' + "9" * 100_000, "seed", '"seed": 0'),
    ('"seed": 1.5', "seed", '"seed": 0'),
    ('"seed": true', "seed", '"seed": 0'),
    ('"max_tokens": ' + "1" * 100_000, "max_tokens", '"max_tokens": 8'),
    ('"max_tokens": 99999999999999999999', "max_tokens", '"max_tokens": 9999'),
    ('"max_tokens": "8"', "max_tokens", '"max_tokens": 8'),
    ('"max_completion_tokens": 0', "max_completion_tokens", '"max_completion_tokens": 8'),
    ('"n": 2', "n", '"n": 1'),
    ('"n": "1"', "n", '"n": null'),
    ('"logprobs": "yes"', "logprobs", '"logprobs": false'),
    ('"top_logprobs": -1', "top_logprobs", '"logprobs": true, "max_tokens": 1, "top_logprobs": 5'),
    ('"stream": 1', "stream", '"stream": false'),
    ('"stop": ["\\n"]', "stop", '"stop": null'),
    ('"model": 7', "model", '"model": "judge"'),
    ('"presence_penalty": 0.5', "presence_penalty", '"presence_penalty": 0'),
    ('"frequency_penalty": -1', "frequency_penalty", '"frequency_penalty": null'),
    ('"logit_bias": {"15": 100}', "logit_bias", '"logit_bias": {}'),
    ('"tools": [{"type": "function"}]', "tools", '"user": "trainer-3"'),
]


@pytest.mark.parametrize(("fields", "named", "twin"), REFUSED)
def test_each_bad_parameter_is_a_400_that_names_it_and_its_twin_is_accepted(fields, named, twin):
    err = _refused(fields)
    assert err.status == 400 and err.body["error"]["param"] == named, err.body
    assert named in err.body["error"]["message"], err.body
    _parse(twin)  # the honest version passes


@pytest.mark.parametrize(
    ("messages", "named"),
    [
        ('[{"role": "tool", "content": "x"}]', "messages.0.role"),
        ('[{"role": "user", "content": 5}]', "messages.0.content"),
        ('[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]', "messages.0.content"),
        ('[{"role": "user", "content": [{"type": "text", "text": null}]}]', "messages.0.content"),
        ('[{"role": "user"}]', "messages.0.content"),
        ("[]", "messages"),
        ('"hello"', "messages"),
    ],
)
def test_bad_messages_name_the_message_and_field(messages, named):
    with pytest.raises(RequestError) as err:
        parse_chat(json.loads('{"messages": ' + messages + "}"), CFG)
    assert err.value.status == 400 and err.value.body["error"]["param"] == named, err.value.body


def test_text_parts_are_the_content():
    call = parse_chat(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}, CFG
    )
    assert call.request.messages == ({"role": "user", "content": "a\nb"},)


def test_a_body_that_is_not_an_object_or_not_json_says_so():
    with pytest.raises(RequestError, match="JSON object"):
        parse_chat([1, 2], CFG)
    with pytest.raises(RequestError, match="not valid JSON: Expecting"):
        decode_json(b'{"messages": [}', 32)
    with pytest.raises(RequestError, match="not UTF-8"):
        decode_json(b'{"a": "\xff"}', 32)


def test_every_unsupported_field_is_refused_unless_at_its_default():
    for name, default in UNSUPPORTED.items():
        assert _refused(f'"{name}": "something else"').body["error"]["param"] == name
        _parse(f'"{name}": {json.dumps(default)}')
        _parse(f'"{name}": null')
