"""Where language-model text comes from: the user's files and the offline speeches."""

import pytest

from theseus_pl.data.text_corpus import ConventionSpeeches, TextFiles


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


def test_missing_text_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data.files: not found: .*nowhere.txt"):
        TextFiles([tmp_path / "nowhere.txt"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"no \.txt file in"):
        TextFiles([tmp_path / "empty"]).documents()
