//! Enums whose values each have one name (input sizes, outcomes, cost variants, fence kinds,
//! …): printing a value as its name and reading a name back are the same code for every such
//! enum, so it is written here once, as two macros, rather than once per enum.
//!
//! Each enum keeps what differs: the method that gives a value's name, the list of its values
//! (`ALL`), and the error an unknown name gets.

/// `impl Display for $ty`: a value prints as `self.$name()`.
#[macro_export]
macro_rules! display_by_name {
    ($ty:ident, $name:ident) => {
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.$name())
            }
        }
    };
}

/// `impl FromStr for $ty`: a name reads as the value of `$ty::ALL` whose `$name()` it is;
/// any other string is the error `$unknown(s)`, of type `$err`.
#[macro_export]
macro_rules! parse_by_name {
    ($ty:ident, $name:ident, $err:ty, $unknown:expr) => {
        impl std::str::FromStr for $ty {
            type Err = $err;

            fn from_str(s: &str) -> std::result::Result<$ty, $err> {
                let unknown: fn(&str) -> $err = $unknown;
                $ty::ALL
                    .into_iter()
                    .find(|value| value.$name() == s)
                    .ok_or_else(|| unknown(s))
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Colour {
        Red,
        Green,
    }

    impl Colour {
        const ALL: [Colour; 2] = [Colour::Red, Colour::Green];

        fn label(self) -> &'static str {
            match self {
                Colour::Red => "red",
                Colour::Green => "green",
            }
        }
    }

    display_by_name!(Colour, label);
    parse_by_name!(Colour, label, String, |s| format!("no colour '{s}'"));

    #[test]
    fn every_value_reads_back_from_the_name_it_prints_as() {
        for colour in Colour::ALL {
            assert_eq!(colour.to_string().parse::<Colour>(), Ok(colour));
        }
        assert_eq!(Colour::Green.to_string(), "green");
    }

    #[test]
    fn an_unknown_name_gets_the_enum_s_own_error() {
        assert_eq!("Red".parse::<Colour>(), Err("no colour 'Red'".to_string()));
        assert_eq!("".parse::<Colour>(), Err("no colour ''".to_string()));
    }
}
