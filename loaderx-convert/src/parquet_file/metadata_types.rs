//! The Thrift types of parquet's metadata, as the parquet crate (60.1)
//! reads them: for the footer (`FileMetaData`) and every page header
//! (`PageHeader`).
//!
//! The crate reads a known field by its id with the type the format gives
//! it, whatever type the field's header declares, and skips unknown fields
//! by their declared type. Where the two disagree (a field 1 of
//! `DataPageHeader` declared a list, say), the crate reads other bytes than
//! a plain Thrift reader, and what it then finds can be anything: the
//! lists of booleans it skips without reading make it loop for seconds
//! (AFL++ found such page headers). Checking metadata against these types
//! first makes the crate's reading and ours the same.

/// A Thrift type as parquet's metadata uses it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
    Bool,
    Byte,
    I16,
    I32,
    I64,
    Double,
    Binary,
    List(&'static Ty),
    /// A struct or union: its fields' ids and types (others are skipped).
    Struct(&'static [(i16, Ty)]),
}

impl Ty {
    /// The compact protocol's type code(s) of a value of this type.
    pub(super) fn accepts(self, code: u8) -> bool {
        match self {
            Ty::Bool => matches!(code, 1 | 2),
            Ty::Byte => code == 3,
            Ty::I16 => code == 4,
            Ty::I32 => code == 5,
            Ty::I64 => code == 6,
            Ty::Double => code == 7,
            Ty::Binary => code == 8,
            Ty::List(_) => matches!(code, 9 | 10),
            Ty::Struct(_) => code == 12,
        }
    }
}

const EMPTY: Ty = Ty::Struct(&[]);

const KEY_VALUE: Ty = Ty::Struct(&[(1, Ty::Binary), (2, Ty::Binary)]);

const TIME_UNIT: Ty = Ty::Struct(&[(1, EMPTY), (2, EMPTY), (3, EMPTY)]);

const LOGICAL_TYPE: Ty = Ty::Struct(&[
    (1, EMPTY),
    (2, EMPTY),
    (3, EMPTY),
    (4, EMPTY),
    (5, Ty::Struct(&[(1, Ty::I32), (2, Ty::I32)])),
    (6, EMPTY),
    (7, Ty::Struct(&[(1, Ty::Bool), (2, TIME_UNIT)])),
    (8, Ty::Struct(&[(1, Ty::Bool), (2, TIME_UNIT)])),
    (10, Ty::Struct(&[(1, Ty::Byte), (2, Ty::Bool)])),
    (11, EMPTY),
    (12, EMPTY),
    (13, EMPTY),
    (14, EMPTY),
    (15, EMPTY),
    (16, Ty::Struct(&[(1, Ty::Byte)])),
    (17, Ty::Struct(&[(1, Ty::Binary)])),
    (18, Ty::Struct(&[(1, Ty::Binary), (2, Ty::I32)])),
    (19, EMPTY),
]);

const SCHEMA_ELEMENT: Ty = Ty::Struct(&[
    (1, Ty::I32),
    (2, Ty::I32),
    (3, Ty::I32),
    (4, Ty::Binary),
    (5, Ty::I32),
    (6, Ty::I32),
    (7, Ty::I32),
    (8, Ty::I32),
    (9, Ty::I32),
    (10, LOGICAL_TYPE),
]);

/// `Statistics` and `PageStatistics` (the same fields).
const STATISTICS: Ty = Ty::Struct(&[
    (1, Ty::Binary),
    (2, Ty::Binary),
    (3, Ty::I64),
    (4, Ty::I64),
    (5, Ty::Binary),
    (6, Ty::Binary),
    (7, Ty::Bool),
    (8, Ty::Bool),
    (9, Ty::I64),
]);

const COLUMN_META_DATA: Ty = Ty::Struct(&[
    (1, Ty::I32),
    (2, Ty::List(&Ty::I32)),
    (3, Ty::List(&Ty::Binary)),
    (4, Ty::I32),
    (5, Ty::I64),
    (6, Ty::I64),
    (7, Ty::I64),
    (8, Ty::List(&KEY_VALUE)),
    (9, Ty::I64),
    (10, Ty::I64),
    (11, Ty::I64),
    (12, STATISTICS),
    (
        13,
        Ty::List(&Ty::Struct(&[(1, Ty::I32), (2, Ty::I32), (3, Ty::I32)])),
    ),
    (14, Ty::I64),
    (15, Ty::I32),
    (
        16,
        Ty::Struct(&[
            (1, Ty::I64),
            (2, Ty::List(&Ty::I64)),
            (3, Ty::List(&Ty::I64)),
        ]),
    ),
    (
        17,
        Ty::Struct(&[
            (
                1,
                Ty::Struct(&[
                    (1, Ty::Double),
                    (2, Ty::Double),
                    (3, Ty::Double),
                    (4, Ty::Double),
                    (5, Ty::Double),
                    (6, Ty::Double),
                    (7, Ty::Double),
                    (8, Ty::Double),
                ]),
            ),
            (2, Ty::List(&Ty::I32)),
        ]),
    ),
]);

const COLUMN_CHUNK: Ty = Ty::Struct(&[
    (1, Ty::Binary),
    (2, Ty::I64),
    (3, COLUMN_META_DATA),
    (4, Ty::I64),
    (5, Ty::I32),
    (6, Ty::I64),
    (7, Ty::I32),
]);

const ROW_GROUP: Ty = Ty::Struct(&[
    (1, Ty::List(&COLUMN_CHUNK)),
    (2, Ty::I64),
    (3, Ty::I64),
    (
        4,
        Ty::List(&Ty::Struct(&[(1, Ty::I32), (2, Ty::Bool), (3, Ty::Bool)])),
    ),
    (5, Ty::I64),
    (6, Ty::I64),
    (7, Ty::I16),
]);

const AES_GCM: Ty = Ty::Struct(&[(1, Ty::Binary), (2, Ty::Binary), (3, Ty::Bool)]);

/// `FileMetaData`, the footer.
pub(super) const FILE_META_DATA: Ty = Ty::Struct(&[
    (1, Ty::I32),
    (2, Ty::List(&SCHEMA_ELEMENT)),
    (3, Ty::I64),
    (4, Ty::List(&ROW_GROUP)),
    (5, Ty::List(&KEY_VALUE)),
    (6, Ty::Binary),
    (7, Ty::List(&Ty::Struct(&[(1, EMPTY)]))),
    (8, Ty::Struct(&[(1, AES_GCM), (2, AES_GCM)])),
    (9, Ty::Binary),
]);

/// `PageHeader`.
pub(super) const PAGE_HEADER: Ty = Ty::Struct(&[
    (1, Ty::I32),
    (2, Ty::I32),
    (3, Ty::I32),
    (4, Ty::I32),
    (
        5,
        Ty::Struct(&[
            (1, Ty::I32),
            (2, Ty::I32),
            (3, Ty::I32),
            (4, Ty::I32),
            (5, STATISTICS),
        ]),
    ),
    (6, EMPTY),
    (7, Ty::Struct(&[(1, Ty::I32), (2, Ty::I32), (3, Ty::Bool)])),
    (
        8,
        Ty::Struct(&[
            (1, Ty::I32),
            (2, Ty::I32),
            (3, Ty::I32),
            (4, Ty::I32),
            (5, Ty::I32),
            (6, Ty::I32),
            (7, Ty::Bool),
            (8, STATISTICS),
        ]),
    ),
]);
