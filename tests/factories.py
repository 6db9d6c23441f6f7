import factory

from accounts.models import LoginSession, User

DEFAULT_PASSWORD = "correct-horse-battery-staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"user{n}@example.com")
    password = DEFAULT_PASSWORD

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        # Through the manager, so every user has a hashed password and an API key.
        return model_class.objects.create_user(*args, **kwargs)


class LoginSessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LoginSession

    user = factory.SubFactory(UserFactory)
