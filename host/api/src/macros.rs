//! Crate-private macros.

/// Makes a spec type decode an absent or `null` value as its `Default`, the way Go decodes a
/// missing struct field as the zero struct.
///
/// The kube derive gives the root object a `spec` field without a serde default, so an object
/// stored without `spec` (legal where OCM's CRD does not require it) would fail to decode and
/// stall a whole watch. The type must carry `#[serde(remote = "Self")]`, which turns its derived
/// serde impls into inherent functions; this macro supplies the trait impls around them.
macro_rules! default_if_absent {
    ($ty:ident) => {
        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct OptionVisitor;

                impl<'de> ::serde::de::Visitor<'de> for OptionVisitor {
                    type Value = $ty;

                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($ty), " object or null"))
                    }

                    fn visit_none<E: ::serde::de::Error>(self) -> Result<$ty, E> {
                        Ok(<$ty>::default())
                    }

                    fn visit_unit<E: ::serde::de::Error>(self) -> Result<$ty, E> {
                        Ok(<$ty>::default())
                    }

                    fn visit_some<D2: ::serde::Deserializer<'de>>(self, d: D2) -> Result<$ty, D2::Error> {
                        <$ty>::deserialize(d)
                    }
                }

                deserializer.deserialize_option(OptionVisitor)
            }
        }

        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$ty>::serialize(self, serializer)
            }
        }
    };
}
