/* Where is /tools/0/name in this JSON text? A small tokenising JSON parser that records,
 * for every RFC 6901 pointer, the offset of its member name (or of the value for array
 * items and the root), so the editor can put each server error next to its line.
 * A pointer that does not exist (e.g. a REQUIRED member) maps to its nearest ancestor.
 * Syntax errors come back with their line and column. No dependencies.
 */
(function (root) {
  "use strict";

  const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
  const MAX_DEPTH = 512;
  // Each syntax error has a code (the page translates it) and this English text.
  const MESSAGES = {
    unterminated_string: "Unterminated string", invalid_escape: "Invalid escape in a string",
    unexpected_end: "Unexpected end of the text", unexpected_character: "Unexpected character %(char)s",
    too_deep: "Nested too deeply", trailing_comma_object: "Trailing comma before }",
    trailing_comma_array: "Trailing comma before ]", duplicate_key: "Duplicate key %(key)s",
    expected: "Expected %(what)s", end_expected: "Unexpected end of the text; expected %(what)s",
    text_after: "Unexpected text after the JSON document",
  };
  const EXPECTED = {
    name: "a property name in double quotes", colon: "':' after the property name",
    comma_brace: "',' or '}'", comma_bracket: "',' or ']'",
  };

  function escapeToken(key) {
    return key.replace(/~/g, "~0").replace(/\//g, "~1");
  }

  function format(text, args) {
    return text.replace(/%\((\w+)\)s/g, (_, key) => String(args[key]));
  }

  function Problem(code, args, offset) {
    this.code = code;
    this.args = args;
    this.message = format(MESSAGES[code], args.what ? Object.assign({}, args, { what: EXPECTED[args.what] }) : args);
    this.offset = offset;
  }

  function lineStarts(text) {
    const starts = [0];
    for (let i = 0; i < text.length; i++) {
      if (text.charCodeAt(i) === 10) starts.push(i + 1);
    }
    return starts;
  }

  function lineAt(starts, offset) {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= offset) lo = mid; else hi = mid - 1;
    }
    return lo + 1;
  }

  function parse(text, positions) {
    let i = 0;
    const fail = (code, args) => { throw new Problem(code, args || {}, Math.min(i, text.length)); };
    const ws = () => { while (i < text.length && " \t\n\r".indexOf(text[i]) >= 0) i++; };
    const expect = (what) => fail(i >= text.length ? "end_expected" : "expected", { what: what });

    function string() {
      const start = i;
      i++;
      while (i < text.length) {
        const c = text[i];
        if (c === "\\") { i += 2; continue; }
        if (c === "\n") fail("unterminated_string");
        if (c === '"') {
          i++;
          try { return JSON.parse(text.slice(start, i)); } catch (err) { i = start; fail("invalid_escape"); }
        }
        i++;
      }
      i = start;
      return fail("unterminated_string");
    }

    function literal() {
      for (const word of ["true", "false", "null"]) {
        if (text.startsWith(word, i)) { i += word.length; return; }
      }
      NUMBER.lastIndex = i;
      const match = NUMBER.exec(text);
      if (match && match[0].length && match[0] !== "-") { i += match[0].length; return; }
      if (i >= text.length) fail("unexpected_end");
      fail("unexpected_character", { char: JSON.stringify(text[i]) });
    }

    function value(pointer, depth) {
      ws();
      if (depth > MAX_DEPTH) fail("too_deep");
      if (!positions.has(pointer)) positions.set(pointer, i);
      const c = text[i];
      if (c === "{") return object(pointer, depth);
      if (c === "[") return array(pointer, depth);
      if (c === '"') return string();
      return literal();
    }

    function object(pointer, depth) {
      i++;
      ws();
      if (text[i] === "}") { i++; return; }
      const seen = new Set();
      for (;;) {
        ws();
        if (text[i] === "}") fail("trailing_comma_object");
        if (text[i] !== '"') expect("name");
        const at = i;
        const key = string();
        if (seen.has(key)) { i = at; fail("duplicate_key", { key: JSON.stringify(key) }); }
        seen.add(key);
        const child = pointer + "/" + escapeToken(key);
        positions.set(child, at);
        ws();
        if (text[i] !== ":") expect("colon");
        i++;
        value(child, depth + 1);
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "}") { i++; return; }
        expect("comma_brace");
      }
    }

    function array(pointer, depth) {
      i++;
      ws();
      if (text[i] === "]") { i++; return; }
      for (let index = 0; ; index++) {
        ws();
        if (text[i] === "]") fail("trailing_comma_array");
        value(pointer + "/" + index, depth + 1);
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i] === "]") { i++; return; }
        expect("comma_bracket");
      }
    }

    value("", 0);
    ws();
    if (i < text.length) fail("text_after");
  }

  /** Parse ``text``; returns {ok, lineOf(pointer), lines} or {ok: false, error: {message, line, column}}. */
  function locate(text) {
    const starts = lineStarts(text);
    const positions = new Map();
    try {
      parse(text, positions);
    } catch (err) {
      if (!(err instanceof Problem)) throw err;
      const line = lineAt(starts, err.offset);
      return { ok: false, lines: starts.length,
               error: { message: err.message, code: err.code, args: err.args, line: line,
                        column: err.offset - starts[line - 1] + 1 } };
    }
    return {
      ok: true,
      lines: starts.length,
      lineOf: function (pointer) {
        let p = pointer || "";
        for (;;) {
          if (positions.has(p)) return lineAt(starts, positions.get(p));
          if (p === "") return 1;
          p = p.slice(0, p.lastIndexOf("/"));
        }
      },
      has: function (pointer) { return positions.has(pointer); },
    };
  }

  root.HasheeJSON = { locate: locate, escapeToken: escapeToken };
})(window);
