"""Shapes a secret takes in a message that a search for its text, or for ``key=value``, does not find.

The review after eed0614 listed eight shapes; these are the masker's (``secrets.mask_message``, which job
views, events, stored errors and every driver log line go through). A command line's password option and an
Oracle connect string are masked whatever the value, as a URL's password is: with no secret known too (a
forgotten job's event, a row read without its config). A known secret is masked in the forms a message
carries it in: URL-encoded (and decoded, when the config holds it encoded), inside a bytes repr, JSON-escaped
once or twice. What names no credential stays readable.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from seatide.secrets import MASK, LineMasker, mask_message, mask_tree, secret_values

SECRET = "S3cret-9x"      # distinctive: searched for wherever it shows
WORD = "postgres"         # an ordinary word: only where it stands alone


@pytest.mark.parametrize("text, secret", [
    (f"ran: psql --password {SECRET} -h db", SECRET),
    (f"ran: tool --db-password '{SECRET} two' --verbose", SECRET),
    (f"ran: tool --api-token {SECRET}", SECRET),
    (f"mysql -h db -u root -p{SECRET} shop failed", SECRET),
    (f"mysqldump -uroot -p'{SECRET}' shop", SECRET),
    (f"/usr/bin/mariadb -uroot -p{SECRET}", SECRET),
    (f"mysql --password={SECRET} shop", SECRET),
    (f"jdbc:oracle:thin:scott/{SECRET}@db.example:1521/ORCL refused", SECRET),
    (f"jdbc:oracle:thin:scott/{SECRET}@//db.example:1521/ORCL", SECRET),
    (f"sqlplus scott/{SECRET}@ORCL: ORA-01017", SECRET),
])
def test_a_command_lines_password_and_an_oracle_connect_string_are_masked_with_no_secret_known(text, secret):
    shown = mask_message(text, ())
    assert secret not in shown and MASK in shown, shown


@pytest.mark.parametrize("text", [f"mysql -h db -uroot -p{WORD} shop", f"connect scott/{WORD}@ORCL",
                                  f"psql --password {WORD}", f"psql -W {WORD} -h db"])
def test_an_ordinary_word_password_glued_to_its_option_or_user_is_masked(text):
    shown = mask_message(text, {WORD})
    assert WORD not in shown.replace("psql", ""), shown


@pytest.mark.parametrize("text", [
    "psql -h db -p 5432 -U app shop", "mysql -h db -P 3306 -u root -p shop", "cp -pr a b", "ls -p /tmp",
    "tool --password-file /etc/pw --user app", "tool --password -h db", "read /data/users/x@2024.csv",
    "git+https://example.com/org/repo@main", "npm i @scope/pkg@1.2.0"])
def test_command_lines_and_paths_that_hold_no_password_stay_readable(text):
    assert mask_message(text, ()) == text


@pytest.mark.parametrize("secret", ["p@ss-Word9", "s3cr#t/x+y", "pässwörd-1", 'q"uo\\te-9', "tab\tpw-99"])
def test_a_known_secret_is_masked_in_the_forms_a_message_carries_it_in(secret):
    forms = {
        "url-encoded": f"GET http://h/api?x=1&secret_ref={quote(secret, safe='')} failed",
        "url-encoded, '/' kept": f"tried {quote(secret)} as given",
        "bytes repr": f"sent {secret.encode()!r} to the server",
        "str repr": f"value was {secret!r}",
        "json": "answered " + json.dumps({"x": secret}),
        "json, ascii kept": "answered " + json.dumps({"x": secret}, ensure_ascii=False),
        "json in json": "answered " + json.dumps(json.dumps({"x": secret})),
    }
    for form, text in forms.items():
        shown = mask_message(text, {secret})
        assert MASK in shown and shown.startswith(text.split()[0]), (form, shown)
        for carried in (secret, quote(secret, safe=""), repr(secret.encode())[2:-1], json.dumps(secret)[1:-1]):
            assert carried not in shown, (form, shown)


def test_a_secret_the_config_holds_url_encoded_is_masked_decoded_too():
    held = "p%40ss%23Word9"      # written encoded in a JDBC url's password; a driver's message decodes it
    shown = mask_message("login failed with p@ss#Word9 for user app", {held})
    assert "p@ss#Word9" not in shown and "for user app" in shown, shown


def test_a_driver_log_line_masks_the_forms_too():
    secret = "p@ss-Word9"
    shown = LineMasker({secret}).line(f"WARN retry http://h/x?sig={quote(secret, safe='')}&a=b\n")
    assert quote(secret, safe="") not in shown and shown.endswith("&a=b\n"), shown


@pytest.mark.parametrize("text", [
    '{"password": "' + SECRET + '"}',
    json.dumps(json.dumps({"password": SECRET})),
    json.dumps(json.dumps(json.dumps({"password": SECRET}))),
    json.dumps({"why": json.dumps({"options": json.dumps({"api_key": SECRET})})}),
])
def test_a_credential_named_value_in_escaped_json_is_masked_with_no_secret_known(text):
    shown = mask_message(text, ())
    assert SECRET not in shown and MASK in shown, shown


@pytest.mark.parametrize("text", [
    '{"password": null, "token": "' + SECRET + '"}', '{"password":null,"token":"' + SECRET + '"}',
    '{"password": "", "token": "' + SECRET + '"}', "{'password': None, 'token': '" + SECRET + "'}",
    '{\\"password\\":null,\\"token\\":\\"' + SECRET + '\\"}',
    '{"password": null, "x": "a", "api_key": "' + SECRET + '"}'])
def test_an_empty_credential_value_does_not_hide_the_next_one(text):
    shown = mask_message(text, ())
    assert SECRET not in shown and shown.count(MASK) >= 1, shown


def test_an_empty_credential_value_in_json_keeps_the_next_value_aligned():
    shown = mask_message('{"password": null, "x": "' + SECRET + '", "y": "kept"}', {SECRET})
    assert SECRET not in shown and '"y": "kept"' in shown, shown
    tree = mask_tree({"password": None, "x": SECRET, "token": SECRET, "y": "kept"}, ())
    assert tree == {"password": None, "x": SECRET, "token": MASK, "y": "kept"}, tree     # x: no secret known
    assert mask_tree({"password": None, "x": SECRET}, {SECRET}) == {"password": None, "x": MASK}


def test_an_oracle_urls_password_is_one_of_the_configs_secrets():
    job = 'source { Jdbc { url = "jdbc:oracle:thin:scott/Tiger-77@db:1521/ORCL", query = "select 1" } }'
    values = secret_values(job)
    assert "Tiger-77" in values, values
    assert MASK in mask_message("ORA-01017: logon as scott with Tiger-77 denied", values)
