"""Tests for mcp_app.uritemplate."""

from __future__ import annotations

import pytest

from mcp_app.uritemplate import URITemplate, URITemplateError, is_template

# Values from the examples in RFC 6570 section 3.2.
RFC_VALUES: dict[str, object] = {
    "count": ("one", "two", "three"),
    "dom": ["example", "com"],
    "dub": "me/too",
    "hello": "Hello World!",
    "half": "50%",
    "var": "value",
    "who": "fred",
    "base": "http://example.com/home/",
    "path": "/foo/bar",
    "list": ["red", "green", "blue"],
    "keys": {"semi": ";", "dot": ".", "comma": ","},
    "v": "6",
    "x": "1024",
    "y": "768",
    "empty": "",
    "empty_keys": {},
    "empty_list": [],
    "undef": None,
}


# ---------------------------------------------------------------- is_template


def test_is_template() -> None:
    assert is_template("people://{id}")
    assert is_template("file:///{+path}")
    assert not is_template("people://ada")
    assert not is_template("weird://{}")
    assert not is_template("")


# ---------------------------------------------------------------- parsing


def test_attributes_and_variables_in_order() -> None:
    template = URITemplate("test://{a}/x{/b,c}{?d}{&e}")
    assert template.template == "test://{a}/x{/b,c}{?d}{&e}"
    assert template.variables == ("a", "b", "c", "d", "e")
    assert URITemplate("static://thing").variables == ()


def test_repr_eq_hash() -> None:
    one = URITemplate("people://{id}")
    assert repr(one) == "URITemplate('people://{id}')"
    assert one == URITemplate("people://{id}")
    assert one != URITemplate("people://{name}")
    assert one != "people://{id}"
    assert hash(one) == hash(URITemplate("people://{id}"))
    assert len({one, URITemplate("people://{id}")}) == 1


def test_accepts_valid_variable_names() -> None:
    template = URITemplate("x://{a.b}/{A_1}/{%41z}/{n:9999}/{l*}")
    assert template.variables == ("a.b", "A_1", "%41z", "n", "l")


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("people://{id", "unclosed '{' at position 9"),
        ("people://{a{b}", "unclosed '{' at position 9"),
        ("people://id}", "unmatched '}' at position 11"),
        ("people://{}", "empty expression '{}'"),
        ("x://{=a}", "unsupported operator '=' in '{=a}'"),
        ("x://{,a}", "unsupported operator ',' in '{,a}'"),
        ("x://{!a}", "unsupported operator '!' in '{!a}'"),
        ("x://{@a}", "unsupported operator '@' in '{@a}'"),
        ("x://{|a}", "unsupported operator '|' in '{|a}'"),
        ("x://{+}", "empty variable name in '{+}'"),
        ("x://{a,}", "empty variable name in '{a,}'"),
        ("x://{*}", "empty variable name in '{*}'"),
        ("x://{:3}", "empty variable name in '{:3}'"),
        ("x://{a b}", "invalid variable name 'a b' in '{a b}'"),
        ("x://{a-b}", "invalid variable name 'a-b' in '{a-b}'"),
        ("x://{a.}", "invalid variable name 'a.' in '{a.}'"),
        ("x://{a..b}", "invalid variable name 'a..b' in '{a..b}'"),
        ("x://{%4}", "invalid variable name '%4' in '{%4}'"),
        ("x://{a:0}", "invalid prefix length '0' in '{a:0}'"),
        ("x://{a:10000}", "invalid prefix length '10000' in '{a:10000}'"),
        ("x://{a:}", "invalid prefix length '' in '{a:}'"),
        ("x://{a:3*}", "invalid prefix length '3*' in '{a:3*}'"),
    ],
)
def test_malformed_templates(template: str, problem: str) -> None:
    with pytest.raises(URITemplateError) as info:
        URITemplate(template)
    assert str(info.value) == f"invalid URI template {template!r}: {problem}"
    assert isinstance(info.value, ValueError)


# ---------------------------------------------------------------- matching


def test_simple_matches_one_segment() -> None:
    template = URITemplate("people://{id}")
    assert template.match("people://ada") == {"id": "ada"}
    assert template.match("people://a,b;c=d") == {"id": "a,b;c=d"}
    assert template.match("people://a/b") is None
    assert template.match("people://") is None
    assert template.match("people://ada?x") is None
    assert template.match("people://ada#x") is None
    assert template.match("other://ada") is None


def test_literal_around_variable() -> None:
    template = URITemplate("test://template/{id}/data")
    assert template.match("test://template/42/data") == {"id": "42"}
    assert template.match("test://template/42/data/more") is None
    assert template.match("test://template//data") is None
    assert template.match("test://template/4/2/data") is None


def test_literals_are_not_regex() -> None:
    template = URITemplate("a.b+c://(x)/{id}")
    assert template.match("a.b+c://(x)/1") == {"id": "1"}
    assert template.match("aXb+c://(x)/1") is None


def test_static_template_matches_itself_only() -> None:
    template = URITemplate("config://app")
    assert template.match("config://app") == {}
    assert template.match("config://app2") is None


def test_percent_decoding() -> None:
    template = URITemplate("docs://{name}")
    assert template.match("docs://hello%20world.txt") == {"name": "hello world.txt"}
    assert template.match("docs://a%2Fb") == {"name": "a/b"}
    assert template.match("docs://caf%C3%A9") == {"name": "café"}
    assert template.match("docs://100%") == {"name": "100%"}
    # Escapes of bytes that are no UTF-8 text: not the name of "\ufffd", nor of anything.
    assert template.match("docs://%FF") is None
    assert template.match("docs://caf%C3%28") is None
    assert URITemplate("docs://x{?q}").match("docs://x?q=%FE") is None


def test_reserved_matches_nested_paths() -> None:
    template = URITemplate("file:///{+path}")
    assert template.match("file:///readme.md") == {"path": "readme.md"}
    assert template.match("file:///src/app/main.py") == {"path": "src/app/main.py"}
    assert template.match("file:///a%20b/c") == {"path": "a b/c"}
    assert template.match("file:///") is None


def test_reserved_followed_by_literal_and_variable() -> None:
    template = URITemplate("repo://{+path}/blob/{ref}")
    assert template.match("repo://a/b/blob/main") == {"path": "a/b", "ref": "main"}
    assert template.match("repo://a/blob/b/blob/main") == {"path": "a/blob/b", "ref": "main"}
    assert template.match("repo://a/b/blob/main/x") is None


def test_reserved_stops_before_query_expression() -> None:
    template = URITemplate("file:///{+path}{?rev}")
    assert template.match("file:///a/b?rev=3") == {"path": "a/b", "rev": "3"}
    assert template.match("file:///a/b") == {"path": "a/b"}


def test_simple_list() -> None:
    template = URITemplate("map://{x,y}")
    assert template.match("map://1024,768") == {"x": "1024", "y": "768"}
    assert template.match("map://1024") is None
    assert template.match("map://1,2,3") is None


def test_reserved_list() -> None:
    template = URITemplate("r://{+a,b}")
    assert template.match("r://x/y,z/w") == {"a": "x/y", "b": "z/w"}


def test_fragment() -> None:
    template = URITemplate("page://{id}{#section}")
    assert template.match("page://intro#part/1") == {"id": "intro", "section": "part/1"}
    assert template.match("page://intro") is None
    assert URITemplate("page://x{#a,b}").match("page://x#1,2") == {"a": "1", "b": "2"}


def test_path_segments() -> None:
    template = URITemplate("tree://root{/a,b}")
    assert template.match("tree://root/x/y") == {"a": "x", "b": "y"}
    assert template.match("tree://root/x") is None
    assert template.match("tree://root/x/y/z") is None


def test_label() -> None:
    template = URITemplate("file://{name}{.ext}")
    assert template.match("file://readme.md") == {"name": "readme", "ext": "md"}
    assert template.match("file://archive.tar.gz") == {"name": "archive.tar", "ext": "gz"}
    assert template.match("file://readme") is None
    # One variable may hold a dot: ".tar.gz" is what {.ext} makes of "tar.gz".
    assert URITemplate("file:///report{.ext}").match("file:///report.tar.gz") == {"ext": "tar.gz"}
    assert URITemplate("host://www{.a,b}").match("host://www.example.com") == {
        "a": "example",
        "b": "com",
    }


def test_path_parameters() -> None:
    template = URITemplate("item://x{;w,h}")
    assert template.match("item://x;w=1;h=2") == {"w": "1", "h": "2"}
    assert template.match("item://x;w;h=") == {"w": "", "h": ""}
    assert template.match("item://x;h=2;w=1") is None
    assert URITemplate("item://x{;w}").match("item://x;w=a%3Bb") == {"w": "a;b"}


def test_query_any_order_and_optional() -> None:
    template = URITemplate("logs://{service}{?since,level}")
    assert template.match("logs://api") == {"service": "api"}
    assert template.match("logs://api?") == {"service": "api"}
    assert template.match("logs://api?level=warn") == {"service": "api", "level": "warn"}
    assert template.match("logs://api?level=warn&since=2024") == {
        "service": "api",
        "since": "2024",
        "level": "warn",
    }
    assert template.match("logs://api?since=a%20b&&level") == {
        "service": "api",
        "since": "a b",
        "level": "",
    }


def test_query_ignores_unknown_and_keeps_first_repeat() -> None:
    template = URITemplate("logs://{service}{?level}")
    assert template.match("logs://api?page=2&level=1&level=2") == {"service": "api", "level": "1"}
    # A query parameter never overrides a path variable of the same name.
    assert template.match("logs://api?service=evil") == {"service": "api"}


def test_query_rejects_fragment() -> None:
    assert URITemplate("logs://{service}{?level}").match("logs://api?level=1#x") is None


def test_query_continuation_after_literal_query() -> None:
    template = URITemplate("search://items?fixed=1{&q}{&page}")
    assert template.match("search://items?fixed=1&page=2&q=x") == {"q": "x", "page": "2"}
    assert template.match("search://items?fixed=1") == {}
    assert template.match("search://items?fixed=1?q=x") is None


def test_query_continuation_after_a_variable_of_the_literal_query() -> None:
    template = URITemplate("api://search?query={query}{&limit}")
    assert template.match("api://search?query=foo&limit=10") == {"query": "foo", "limit": "10"}
    assert template.match("api://search?query=a%26b") == {"query": "a&b"}
    # A variable in the path may still hold a literal "&".
    assert URITemplate("api://{name}/x?v=1{&limit}").match("api://a&b/x?v=1&limit=2") == {
        "name": "a&b",
        "limit": "2",
    }


def test_query_and_continuation_combined() -> None:
    template = URITemplate("s://x{?a}{&b}")
    assert template.match("s://x?b=2&a=1") == {"a": "1", "b": "2"}


def test_ambiguity_resolves_like_a_regex() -> None:
    # Simple variables are greedy; reserved ones are lazy.
    assert URITemplate("x://{a}{b}").match("x://abc") == {"a": "ab", "b": "c"}
    assert URITemplate("x://{a}-{b}").match("x://1-2-3") == {"a": "1-2", "b": "3"}
    assert URITemplate("x://{+a}-{+b}").match("x://1-2-3") == {"a": "1", "b": "2-3"}
    assert URITemplate("x://{a}{b}").match("x://a") is None


def test_percent_encoded_stop_characters_are_part_of_the_value() -> None:
    assert URITemplate("x://{a}/{b}").match("x://1%2F2/3") == {"a": "1/2", "b": "3"}
    assert URITemplate("x://{a,b}").match("x://1%2C2,3") == {"a": "1,2", "b": "3"}


@pytest.mark.parametrize(
    ("template", "uri"),
    [
        ("date://{y}-{m}-{d}", "date://" + "-" * 20_000 + "?"),
        ("x://{a}{b}{c}{d}!", "x://" + "a" * 20_000),
        ("x://{+a}/{+b}/{+c}/end", "x://" + "a/" * 10_000),
        ("x://{a}.{b}.{c}{?q}", "x://" + "." * 20_000 + "#"),
    ],
)
def test_hostile_uris_do_not_backtrack(template: str, uri: str) -> None:
    # A backtracking regex would need hours for these; the scan takes milliseconds.
    assert URITemplate(template).match(uri) is None


def test_long_uri_matches() -> None:
    path = "/".join(["dir"] * 10_000)
    assert URITemplate("file:///{+path}{?rev}").match(f"file:///{path}?rev=1") == {
        "path": path,
        "rev": "1",
    }


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("x://{/list*}", "explode modifier '*' on 'list' is not supported"),
        ("x://{?keys*}", "explode modifier '*' on 'keys' is not supported"),
        ("x://{var:3}", "prefix modifier ':3' on 'var' is not supported"),
        ("x://{?a}/more", "query expressions must come at the end of the template"),
        ("x://{?a}{b}", "query expressions must come at the end of the template"),
        ("x://{a}/{a}", "variable 'a' appears more than once"),
        ("x://{a,a}", "variable 'a' appears more than once"),
        ("x://{/var:1,var}", "variable 'var' appears more than once"),
        ("x://{a}{?a}", "variable 'a' appears more than once"),
    ],
)
def test_unsupported_for_matching(template: str, problem: str) -> None:
    parsed = URITemplate(template)
    with pytest.raises(URITemplateError) as info:
        parsed.match("x://anything")
    assert str(info.value) == f"URI template {template!r} cannot be used for matching: {problem}"
    # The same template is still fine for expansion.
    assert parsed.expand({}).startswith("x://")


# ---------------------------------------------------------------- expansion


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        # Level 1
        ("{var}", "value"),
        ("{hello}", "Hello%20World%21"),
        ("{half}", "50%25"),
        # Level 2
        ("{+var}", "value"),
        ("{+hello}", "Hello%20World!"),
        ("{+half}", "50%25"),
        ("{base}index", "http%3A%2F%2Fexample.com%2Fhome%2Findex"),
        ("{+base}index", "http://example.com/home/index"),
        ("O{empty}X", "OX"),
        ("O{undef}X", "OX"),
        ("{+path}/here", "/foo/bar/here"),
        ("here?ref={+path}", "here?ref=/foo/bar"),
        ("X{#var}", "X#value"),
        ("X{#hello}", "X#Hello%20World!"),
        # Level 3
        ("map?{x,y}", "map?1024,768"),
        ("{x,hello,y}", "1024,Hello%20World%21,768"),
        ("{+x,hello,y}", "1024,Hello%20World!,768"),
        ("{+path,x}/here", "/foo/bar,1024/here"),
        ("{#x,hello,y}", "#1024,Hello%20World!,768"),
        ("{#path,x}/here", "#/foo/bar,1024/here"),
        ("X{.var}", "X.value"),
        ("X{.x,y}", "X.1024.768"),
        ("{/var}", "/value"),
        ("{/var,x}/here", "/value/1024/here"),
        ("{;x,y}", ";x=1024;y=768"),
        ("{;x,y,empty}", ";x=1024;y=768;empty"),
        ("{?x,y}", "?x=1024&y=768"),
        ("{?x,y,empty}", "?x=1024&y=768&empty="),
        ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
        ("{&x,y,empty}", "&x=1024&y=768&empty="),
        ("{?undef,x}", "?x=1024"),
        ("{?undef}", ""),
        # Level 4
        ("{var:3}", "val"),
        ("{var:30}", "value"),
        ("{list}", "red,green,blue"),
        ("{list*}", "red,green,blue"),
        ("{keys}", "semi,%3B,dot,.,comma,%2C"),
        ("{keys*}", "semi=%3B,dot=.,comma=%2C"),
        ("{+path:6}/here", "/foo/b/here"),
        ("{+list}", "red,green,blue"),
        ("{+list*}", "red,green,blue"),
        ("{+keys}", "semi,;,dot,.,comma,,"),
        ("{+keys*}", "semi=;,dot=.,comma=,"),
        ("{#path:6}/here", "#/foo/b/here"),
        ("{#list}", "#red,green,blue"),
        ("{#list*}", "#red,green,blue"),
        ("{#keys}", "#semi,;,dot,.,comma,,"),
        ("{#keys*}", "#semi=;,dot=.,comma=,"),
        ("X{.var:3}", "X.val"),
        ("X{.list}", "X.red,green,blue"),
        ("X{.list*}", "X.red.green.blue"),
        ("X{.keys}", "X.semi,%3B,dot,.,comma,%2C"),
        ("X{.keys*}", "X.semi=%3B.dot=..comma=%2C"),
        ("{/var:1,x}", "/v/1024"),
        ("{/list}", "/red,green,blue"),
        ("{/list*}", "/red/green/blue"),
        ("{/list*,path:4}", "/red/green/blue/%2Ffoo"),
        ("{/keys}", "/semi,%3B,dot,.,comma,%2C"),
        ("{/keys*}", "/semi=%3B/dot=./comma=%2C"),
        ("{;hello:5}", ";hello=Hello"),
        ("{;list}", ";list=red,green,blue"),
        ("{;list*}", ";list=red;list=green;list=blue"),
        ("{;keys}", ";keys=semi,%3B,dot,.,comma,%2C"),
        ("{;keys*}", ";semi=%3B;dot=.;comma=%2C"),
        ("{?var:3}", "?var=val"),
        ("{?list}", "?list=red,green,blue"),
        ("{?list*}", "?list=red&list=green&list=blue"),
        ("{?keys}", "?keys=semi,%3B,dot,.,comma,%2C"),
        ("{?keys*}", "?semi=%3B&dot=.&comma=%2C"),
        ("{&var:3}", "&var=val"),
        ("{&list}", "&list=red,green,blue"),
        ("{&list*}", "&list=red&list=green&list=blue"),
        ("{&keys}", "&keys=semi,%3B,dot,.,comma,%2C"),
        ("{&keys*}", "&semi=%3B&dot=.&comma=%2C"),
        # Tuples are lists too; empty composites are undefined.
        ("{count}", "one,two,three"),
        ("{count*}", "one,two,three"),
        ("{/count}", "/one,two,three"),
        ("{/count*}", "/one/two/three"),
        ("{;count}", ";count=one,two,three"),
        ("{;count*}", ";count=one;count=two;count=three"),
        ("{?count}", "?count=one,two,three"),
        ("{?count*}", "?count=one&count=two&count=three"),
        ("{&count*}", "&count=one&count=two&count=three"),
        ("X{.dom*}", "X.example.com"),
        ("X{empty_list}Y{empty_keys}", "XY"),
        ("{?empty_list*,empty_keys*}", ""),
        ("{;empty_list,empty_keys,x}", ";x=1024"),
        ("{dub}", "me%2Ftoo"),
        ("{+dub}", "me/too"),
    ],
)
def test_expand_rfc_examples(template: str, expected: str) -> None:
    assert URITemplate(template).expand(RFC_VALUES) == expected


def test_expand_empty_members_use_ifemp() -> None:
    values = {"l": ["", "a"], "k": {"e": "", "f": "1"}, "z": [""]}
    assert URITemplate("{;l*}").expand(values) == ";l;l=a"
    assert URITemplate("{?l*}").expand(values) == "?l=&l=a"
    assert URITemplate("{;k*}").expand(values) == ";e;f=1"
    assert URITemplate("{?k*}").expand(values) == "?e=&f=1"
    assert URITemplate("{k*}").expand(values) == "e=,f=1"
    assert URITemplate("{;z}").expand(values) == ";z"
    assert URITemplate("{?z}").expand(values) == "?z="


def test_expand_non_string_values() -> None:
    template = URITemplate("page://{n}{?limit,flag}")
    assert template.expand({"n": 7, "limit": 2.5, "flag": True}) == "page://7?limit=2.5&flag=True"
    assert template.expand({"n": [1, 2], "limit": {3: 4}}) == "page://1,2?limit=3,4"


def test_expand_missing_values() -> None:
    assert URITemplate("people://{id}").expand({}) == "people://"
    assert URITemplate("x://a{/b}{?c}{#d}").expand({"c": None}) == "x://a"


def test_expand_encoding() -> None:
    values = {"v": "a b/c?d#e%20é~-._"}
    assert URITemplate("{v}").expand(values) == "a%20b%2Fc%3Fd%23e%2520%C3%A9~-._"
    # Reserved expansion keeps reserved characters and existing percent-encoded triplets.
    assert URITemplate("{+v}").expand(values) == "a%20b/c?d#e%20%C3%A9~-._"
    assert URITemplate("{+v}").expand({"v": "100%"}) == "100%25"
    assert URITemplate("{+v}").expand({"v": "%zz%4"}) == "%25zz%254"
    assert URITemplate("{+v}").expand({"v": ":/?#[]@!$&'()*+,;="}) == ":/?#[]@!$&'()*+,;="


@pytest.mark.parametrize(
    ("template", "value"),
    [("{list:2}", ["a", "b"]), ("{?keys:2}", {"a": "b"})],
)
def test_expand_prefix_on_composite_value_is_an_error(template: str, value: object) -> None:
    name = template.strip("{?}").split(":")[0]
    with pytest.raises(URITemplateError, match=r"prefix modifier ':2' cannot be applied"):
        URITemplate(template).expand({name: value})


def test_expand_prefix_on_empty_composite_is_undefined() -> None:
    assert URITemplate("{list:2}").expand({"list": []}) == ""


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize(
    ("template", "values"),
    [
        ("people://{id}", {"id": "Ada Lovelace"}),
        ("people://{id}", {"id": "a/b?c#d,e"}),
        ("test://template/{id}/data", {"id": "x%y"}),
        ("file:///{+path}", {"path": "src/my dir/ünïcode.py"}),
        ("file:///{+path}{?rev,mode}", {"path": "a/b", "rev": "1&2=3", "mode": "r w"}),
        ("file:///{+path}{?rev,mode}", {"path": "a/b", "mode": "x"}),
        ("map://{x,y}", {"x": "1,2", "y": "3"}),
        ("tree://root{/a,b}{.ext}", {"a": "x/y", "b": "z", "ext": "txt"}),
        ("item://x{;w,h}", {"w": "", "h": "a;b=c"}),
        ("page://{id}{#section}", {"id": "p", "section": "a b/c"}),
        ("search://items?fixed=1{&q,page}", {"q": "a&b"}),
        ("api://search?query={query}{&limit}", {"query": "a&b", "limit": "10"}),
        ("file:///report{.ext}", {"ext": "tar.gz"}),
    ],
)
def test_expand_then_match_round_trips(template: str, values: dict[str, str]) -> None:
    parsed = URITemplate(template)
    assert parsed.match(parsed.expand(values)) == values


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        # RFC 6570 section 3.2's own examples of a variable used twice.
        ("{/var:1,var}", "/v/value"),
        ("{.who,who}", ".fred.fred"),
        ("{?var,var}", "?var=value&var=value"),
    ],
)
def test_a_variable_used_twice_expands_twice(template: str, expected: str) -> None:
    parsed = URITemplate(template)
    assert parsed.expand({"var": "value", "who": "fred"}) == expected
    assert len(parsed.variables) == 1


@pytest.mark.parametrize(
    ("values", "uri"),
    [
        ({"id": "7", "r": "2"}, "x://7&r=2"),
        ({"id": "7", "q": "1", "r": "2"}, "x://7?q=1&r=2"),
        ({"id": "7"}, "x://7"),
        ({"id": "a&b", "r": "2"}, "x://a%26b&r=2"),
    ],
)
def test_a_continued_query_whose_first_part_is_absent_matches_what_it_expands_to(
    values: dict[str, str], uri: str
) -> None:
    template = URITemplate("x://{id}{?q}{&r}")
    assert template.expand(values) == uri
    assert template.match(uri) == values


@pytest.mark.parametrize(
    ("uri", "values"),
    [
        ("file:///a&b.txt?q=1", {"path": "a&b.txt", "q": "1"}),
        ("file:///a&b.txt", {"path": "a&b.txt"}),
        ("file:///a&b.txt&r=2", {"path": "a&b.txt", "r": "2"}),
    ],
)
def test_a_reserved_path_keeps_its_own_ampersands_beside_a_continued_query(
    uri: str, values: dict[str, str]
) -> None:
    # Only a parameter of the template ("r=") after an "&" starts the query without its "?".
    assert URITemplate("file:///{+path}{?q}{&r}").match(uri) == values
