//! The drawing area the panels draw on and its result: shared by the page (`svg.rs`)
//! and the panels (`panel.rs`) without either seeing the other's code.

use plotters::coord::Shift;
use plotters::prelude::{DrawingArea, DrawingAreaErrorKind, SVGBackend};

pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
pub(crate) type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;
