//! A scenario file's text as one strict JSON value: nothing after it, and no key twice in any
//! object. `serde_json` alone takes the first value of `{…} x` and keeps the last of two equal
//! keys (its `Map` inserts over the first); the typed fields of a scenario reject a repeated
//! key (serde's derive), but the free-form objects (`scheme`, `nemesis`, `expect_by_scheme`)
//! would silently keep the last one (issue 31).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `text` as exactly one JSON value in which no object gives a key twice. Errors read
/// `FIELD: PROBLEM at line L column C`, or serde_json's own for bad syntax.
pub fn parse_strict(text: &str) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Strict { field: "" }
        .deserialize(&mut de)
        .map_err(|e| e.to_string())?;
    de.end()
        .map_err(|e| format!("{e}: the file must hold one JSON object and nothing after it"))?;
    Ok(value)
}

/// One value at `field` (`""` for the whole file).
struct Strict<'a> {
    field: &'a str,
}

impl Strict<'_> {
    fn child(&self, key: &str) -> String {
        if self.field.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.field)
        }
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let field = format!("{}[{}]", self.field, items.len());
            match seq.next_element_seed(Strict { field: &field })? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let field = self.child(&key);
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "{field}: given twice in one object (each key once)"
                )));
            }
            let value = map.next_value_seed(Strict { field: &field })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_without_repeated_keys() {
        assert_eq!(
            parse_strict(r#" { "a": [1, -2, 2.5, "x", null, true, {"b": {}}] } "#).unwrap(),
            serde_json::json!({ "a": [1, -2, 2.5, "x", null, true, {"b": {}}] })
        );
        let err = parse_strict(r#"{ "a": 1 } x"#).unwrap_err();
        assert!(
            err.starts_with("trailing characters at line 1 column 12: the file must hold one"),
            "{err}"
        );
        let err = parse_strict(r#"{ "a": 1 }{ "a": 2 }"#).unwrap_err();
        assert!(err.starts_with("trailing characters"), "{err}");
        let err = parse_strict(r#"{ "scheme": { "name": "a", "name": "b" } }"#).unwrap_err();
        assert!(
            err.starts_with("scheme.name: given twice in one object (each key once) at line 1"),
            "{err}"
        );
        let err = parse_strict(r#"{ "f": [{}, { "k": 1, "k": 1 }] }"#).unwrap_err();
        assert!(err.starts_with("f[1].k: given twice"), "{err}");
        assert!(parse_strict("{ \"a\": 1e400 }").is_err());
        assert!(parse_strict("").is_err());
    }
}
