"""Where language-model text comes from: the user's files and the offline speeches."""

import pytest

from theseus_pl.data.text_corpus import (
    CORPORA,
    ConventionSpeeches,
    GuardianHeadlines,
    PresidentialDebates,
    TextFiles,
    text_source,
)

pytestmark = pytest.mark.quick


def test_the_offline_text_is_the_conventions_speeches_one_document_each():
    source = ConventionSpeeches()
    documents = source.documents()
    assert len(documents) == 189
    assert documents[0].startswith("BARACK OBAMA: Thank you.")
    assert source.fingerprint() == ConventionSpeeches().fingerprint()


def test_text_files_are_one_document_each_and_a_folder_stands_for_its_txt_files(tmp_path):
    (tmp_path / "corpus" / "more").mkdir(parents=True)
    (tmp_path / "corpus" / "b.txt").write_text("second text")
    (tmp_path / "corpus" / "more" / "c.txt").write_text("third text")
    (tmp_path / "corpus" / "notes.md").write_text("not text of the corpus")
    (tmp_path / "a.txt").write_text("first text")
    source = TextFiles([tmp_path / "a.txt", tmp_path / "corpus"])
    assert source.documents() == ["first text", "second text", "third text"]
    before = source.fingerprint()
    (tmp_path / "a.txt").write_text("first text, changed")
    assert TextFiles([tmp_path / "a.txt", tmp_path / "corpus"]).fingerprint() != before


def test_an_empty_file_added_to_a_text_folder_changes_no_fingerprint_and_one_not_utf8_is_named(tmp_path):
    """The fingerprint is what a resume checks the data by: an empty file is no document, so the documents and the
    held-out draw are the same and a resume of the run must not be refused."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("first text")
    before = TextFiles([tmp_path / "corpus"]).fingerprint()
    (tmp_path / "corpus" / "b.txt").write_text(" \n")
    assert TextFiles([tmp_path / "corpus"]).fingerprint() == before
    (tmp_path / "corpus" / "b.txt").write_text("second text")
    assert TextFiles([tmp_path / "corpus"]).fingerprint() != before
    (tmp_path / "corpus" / "c.txt").write_bytes("caf\u00e9 au lait".encode("latin-1"))
    for read in (TextFiles.documents, TextFiles.fingerprint):
        with pytest.raises(ValueError) as refused:
            read(TextFiles([tmp_path / "corpus"], "data.other_text.files"))
        assert str(refused.value).startswith(
            f"data.other_text.files: {tmp_path / 'corpus' / 'c.txt'} is not UTF-8 text (invalid continuation byte at "
            "byte 3, line 1)."
        )


def test_missing_text_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data.files: not found: .*nowhere.txt"):
        TextFiles([tmp_path / "nowhere.txt"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"data.other_text.files: no \.txt file in .*empty"):  # as it is named
        TextFiles([tmp_path / "empty"], "data.other_text.files")
    with pytest.raises(ValueError, match=r"data.files=.*empty must be a list of text files or folders: data.files=\["):
        TextFiles(str(tmp_path / "empty"))  # a folder typed without brackets was read letter by letter


def test_the_other_offline_corpora_are_the_2016_debates_and_the_guardian_headlines_by_debate_and_by_day():
    debates = PresidentialDebates().documents()
    assert len(debates) == 4  # the vice-presidential debate and three presidential ones
    assert debates[0].startswith("Quijano: Good evening. From Longwood University")
    assert "\nKaine: " in debates[0] and "\nPence: " in debates[0] and "\nTrump: " in debates[1]
    headlines = GuardianHeadlines().documents()
    assert len(headlines) == 170 and headlines[0].splitlines()[0] == "Johnson is asking Santa for a Christmas recovery"
    assert len({source().fingerprint() for source in CORPORA.values()}) == 3


def test_a_text_is_named_by_files_then_hub_dataset_then_corpus_and_nothing_names_none(tmp_path):
    (tmp_path / "a.txt").write_text("text")
    assert isinstance(text_source({"files": [tmp_path / "a.txt"], "corpus": "guardian_headlines"}), TextFiles)
    hub = text_source({"hub_dataset": "Salesforce/wikitext", "hub_split": None, "corpus": "guardian_headlines"})
    assert (hub.name, hub.split, hub.column) == ("Salesforce/wikitext", "train", "text")
    assert isinstance(text_source({"corpus": "presidential_debates_2016"}), PresidentialDebates)
    assert text_source({"corpus": None, "files": None}) is None
    with pytest.raises(ValueError, match=r"data.other_text.corpus='news' is not a corpus here: give one of conv"):
        text_source({"corpus": "news"}, "data.other_text")


def test_text_files_are_fingerprinted_by_their_bytes_as_every_cache_key_is_and_read_as_python_reads_text(tmp_path):
    """Each file was read twice to be fingerprinted; read once, the fingerprint is the one cache entries were made
    under (content_digest), and a CRLF file's documents are those read_text gives."""
    from theseus_pl.data.cache_entry import content_digest

    (tmp_path / "a.txt").write_bytes(b"one line\r\nand another\r\n")
    (tmp_path / "empty.txt").write_text("  \n")
    source = TextFiles([tmp_path])
    assert source.fingerprint() == f"files:{content_digest(tmp_path / 'a.txt')}"
    assert source.documents() == [(tmp_path / "a.txt").read_text(encoding="utf-8")] == ["one line\nand another\n"]
