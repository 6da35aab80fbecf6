//! How a sync's state keeps its tree entries and scan records: one short string each (a
//! large tree's state is read by every pass, and a string per entry reads several times
//! faster than a map), with the map form of earlier states still read.

use serde::de::{self, Deserialize, Deserializer, MapAccess, Unexpected, Visitor};

/// Reads a `T` kept as a string (`parse`; `expecting` says its form) or, as earlier states
/// kept it, as a map of its fields (`Fields`).
pub(crate) fn string_or_map<'de, D, T, Fields>(
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
