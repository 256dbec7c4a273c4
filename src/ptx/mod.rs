//! PTX intermediate representation, parser, printer and passes.
