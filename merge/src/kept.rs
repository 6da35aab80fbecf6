//! How a sync's state keeps its tree entries and scan records: one short string each (a
//! large tree's state is read by every pass, and a string per entry reads several times
//! faster than a map), with the map form of earlier states still read.

use serde::de::{self, Deserialize, Deserializer, MapAccess, Unexpected, Visitor};

/// Reads a `T` kept as a string (`parse`; `expecting` says its form) or, as earlier states
/// kept it, as a map of its fields (`Fields`).
pub fn string_or_map<'de, D, T, Fields>(
    deserializer: D,
    expecting: &'static str,
    parse: fn(&str) -> Option<T>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    Fields: Deserialize<'de> + Into<T>,
{
    struct Either<T, Fields> {
        expecting: &'static str,
        parse: fn(&str) -> Option<T>,
        fields: std::marker::PhantomData<Fields>,
    }
    impl<'de, T, Fields: Deserialize<'de> + Into<T>> Visitor<'de> for Either<T, Fields> {
        type Value = T;
        fn expecting(&self, out: &mut std::fmt::Formatter) -> std::fmt::Result {
            out.write_str(self.expecting)
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
            (self.parse)(text).ok_or_else(|| E::invalid_value(Unexpected::Str(text), &self))
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            Fields::deserialize(de::value::MapAccessDeserializer::new(map)).map(Into::into)
        }
    }
    deserializer.deserialize_any(Either {
        expecting,
        parse,
        fields: std::marker::PhantomData::<Fields>,
    })
}

/// Reads a map kept in key order (as serde writes a `BTreeMap`) by building it from the
/// sorted pairs at once, not one insert (and a search) per key: a large state's read was
/// mostly those searches.
pub fn sorted_map<'de, D, V>(
    deserializer: D,
) -> Result<std::collections::BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct Pairs<V>(std::marker::PhantomData<V>);
    impl<'de, V: Deserialize<'de>> Visitor<'de> for Pairs<V> {
        type Value = std::collections::BTreeMap<String, V>;
        fn expecting(&self, out: &mut std::fmt::Formatter) -> std::fmt::Result {
            out.write_str("a map")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(0));
            while let Some(pair) = map.next_entry::<String, V>()? {
                pairs.push(pair);
            }
            // Sorted already, the sort is one look along it; a later duplicate wins.
            Ok(pairs.into_iter().collect())
        }
    }
    deserializer.deserialize_map(Pairs(std::marker::PhantomData))
}
