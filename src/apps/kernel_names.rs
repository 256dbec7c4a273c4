//! Kernel names as a C++ programmer writes them, for the manifest's "no kernel" error.
//!
//! The PTX of a C++ kernel names it by its mangled symbol (`_Z10checkChainPKfS0_iiPi`), and a
//! template kernel is in the PTX only once instantiated, so listing the PTX's entries told a user
//! neither what to write in `kernel = ...` nor that a template exists. The error lists PTX names
//! in the form the manifest takes ([`crate::ptx::demangle::call_name`]: `checkChain`,
//! `chainStep<float, 256>`), and this file finds the template kernels a source declares, with
//! their parameter lists, so the error can say that a name needs its template arguments.

/// A `__global__` function template a source declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateKernel {
    pub name: String,
    /// The text between `template <` and its `>`, e.g. `typename T, int B`.
    pub params: String,
}

impl TemplateKernel {
    /// The name with example arguments, one per parameter: a type for `typename`/`class`,
    /// `true` for `bool`, `256` for other values (`chainStep<float, 256>`).
    pub fn example(&self) -> String {
        let args: Vec<&str> = split_top_level(&self.params)
            .iter()
            .map(|p| {
                let first = p.split_whitespace().next().unwrap_or("");
                match first {
                    "typename" | "class" => "float",
                    "bool" => "true",
                    _ => "256",
                }
            })
            .collect();
        format!("{}<{}>", self.name, args.join(", "))
    }
}

/// The `__global__` function templates declared in `texts`, each name once, in order found.
pub fn template_kernels<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<TemplateKernel> {
    let mut found: Vec<TemplateKernel> = Vec::new();
    for text in texts {
        let mut rest = text;
        while let Some(at) = find_word(rest, "template") {
            let after = &rest[at + "template".len()..];
            rest = after;
            let Some(open) = after.trim_start().strip_prefix('<') else {
                continue;
            };
            let Some(close) = matching_angle(open) else {
                continue;
            };
            let params = open[..close].trim().to_string();
            let declaration = &open[close + 1..];
            let Some((head, name)) = declared_function(declaration) else {
                continue;
            };
            if find_word(head, "__global__").is_some() && !found.iter().any(|t| t.name == name) {
                found.push(TemplateKernel {
                    name: name.to_string(),
                    params,
                });
            }
        }
    }
    found
}

/// The function a declaration starting `text` declares: the text before its name (where
/// `__global__` is) and the name, the identifier before the first `(` that is not an attribute's
/// (`__launch_bounds__(256)`); `None` where a `;` or `{` comes first.
fn declared_function(text: &str) -> Option<(&str, &str)> {
    let mut from = 0;
    loop {
        let end = from + text[from..].find(['(', ';', '{'])?;
        if !text[end..].starts_with('(') {
            return None;
        }
        let head = text[..end].trim_end();
        let name = head
            .rsplit(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("");
        if !matches!(
            name,
            "__launch_bounds__" | "__attribute__" | "__declspec" | ""
        ) {
            return Some((&head[..head.len() - name.len()], name));
        }
        // Skip the attribute's arguments.
        let mut depth = 0usize;
        let close = text[end..].char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(end + i + 1);
                    }
                }
                _ => {}
            }
            None
        })?;
        from = close;
    }
}

/// The byte offset of `word` in `text` as a whole identifier.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).map(|(at, _)| at).find(|&at| {
        !text[..at].chars().next_back().is_some_and(is_ident)
            && !text[at + word.len()..].chars().next().is_some_and(is_ident)
    })
}

/// The offset of the `>` closing a list that starts just after a `<`.
fn matching_angle(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '>' if depth == 0 => return Some(i),
            '>' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// `text` split at the commas outside brackets.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts.retain(|p| !p.is_empty());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_kernels_are_found_with_their_parameters() {
        let text = "template <typename T>\n__device__ T twice(T x) { return 2 * x; }\n\
                    template<typename T, int B> __global__ void chainStep(T *x, int n) {}\n\
                    template <class T, bool Last = (sizeof(T) > 4)>\n__global__ void\n\
                    __launch_bounds__(256) other(T *x);\n__global__ void plain(int *x) {}\n";
        let found = template_kernels([text]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].name, "chainStep");
        assert_eq!(found[0].params, "typename T, int B");
        assert_eq!(found[0].example(), "chainStep<float, 256>");
        assert_eq!(found[1].name, "other");
        assert_eq!(found[1].example(), "other<float, true>");
    }
}
