//! The heart (being rebuilt): see `turn` and `conversations`.

mod conversations;
mod legacy;
mod turn;

pub use legacy::*;
